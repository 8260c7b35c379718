#include "worker/gpu/layers/gpu_softmax.h"

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<Shape> GpuSoftmax::Configure(const Shape& in) {
  bool fits = !in.empty() && in.size() <= 3;
  for (int64_t d : in) fits = fits && d >= 1;
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": does not fit the per-sample input ", ShapeString(in)));
  }
  // NCHW: every sample is [C, positions], the channels the axis.
  channels_ = in[0];
  positions_ = NumElements(in) / in[0];
  return in;
}

absl::Status GpuSoftmax::Forward(GpuContext& c, const float* in, float* out,
                                 int64_t n, Mode) {
  in_ = in;
  shape_ = {n, channels_, positions_};
  return gpu::SoftmaxForward(shape_, in, out, c.stream());
}

absl::Status GpuSoftmax::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return gpu::SoftmaxBackward(shape_, in_, dy, dx, c.stream());
}

}  // namespace cohort
