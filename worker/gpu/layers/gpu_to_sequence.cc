#include "worker/gpu/layers/gpu_to_sequence.h"

#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::CopyOnDevice;

absl::StatusOr<Shape> GpuToSequence::Configure(const Shape& in) {
  if (in.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects {channels, height, width}, got ", ShapeString(in)));
  }
  size_ = NumElements(in);
  return Shape{in[0], in[1] * in[2]};
}

absl::Status GpuToSequence::Forward(GpuContext& c, const float* in, float* out,
                                    int64_t n, Mode) {
  n_ = n;
  return CopyOnDevice(c, out, in, n * size_);
}

absl::Status GpuToSequence::Backward(GpuContext& c, const float* dy,
                                     float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return CopyOnDevice(c, dx, dy, n_ * size_);
}

}  // namespace cohort
