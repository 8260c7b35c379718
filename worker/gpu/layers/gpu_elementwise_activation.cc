#include "worker/gpu/layers/gpu_elementwise_activation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "kernels/cuda/layer_ops.h"

namespace cohort {

std::string GpuElementwiseActivation::Name() const {
  return ActivationName(kind_, slope_);
}

absl::StatusOr<Shape> GpuElementwiseActivation::Configure(const Shape& in) {
  if (!std::isfinite(slope_)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": negative_slope must be finite"));
  }
  size_ = NumElements(in);
  return in;
}

absl::Status GpuElementwiseActivation::Forward(GpuContext& c, const float* in,
                                               float* out, int64_t n, Mode) {
  in_ = in;
  count_ = n * size_;
  return gpu::ActivationForward(kind_, static_cast<float>(slope_), in, out,
                                count_, c.stream());
}

absl::Status GpuElementwiseActivation::Backward(GpuContext& c, const float* dy,
                                                float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return gpu::ActivationBackward(kind_, static_cast<float>(slope_), in_, dy, dx,
                                 count_, c.stream());
}

}  // namespace cohort
