#include "worker/gpu/layers/gpu_flatten.h"

#include "common/tensor.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::CopyOnDevice;

absl::StatusOr<Shape> GpuFlatten::Configure(const Shape& in) {
  size_ = NumElements(in);
  return Shape{size_};
}

absl::Status GpuFlatten::Forward(GpuContext& c, const float* in, float* out,
                                 int64_t n, Mode) {
  n_ = n;
  return CopyOnDevice(c, out, in, n * size_);
}

absl::Status GpuFlatten::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return CopyOnDevice(c, dx, dy, n_ * size_);
}

}  // namespace cohort
