#include "worker/gpu/layers/gpu_prelu.h"

#include "absl/strings/str_cat.h"

namespace cohort {

std::string GpuPrelu::Name() const {
  return absl::StrCat("prelu(", num_parameters_, ")");
}

absl::StatusOr<Shape> GpuPrelu::Configure(const Shape& in) {
  bool fits = !in.empty() && in.size() <= 3;
  for (int64_t d : in) fits = fits && d >= 1;
  if (!fits || (num_parameters_ != 1 && num_parameters_ != in[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": does not fit the per-sample input ", ShapeString(in)));
  }
  sample_size_ = NumElements(in);
  positions_ = sample_size_ / in[0];
  return in;
}

void GpuPrelu::Bind(const std::vector<float*>& values,
                    const std::vector<float*>& grads) {
  weight_ = values[0];
  weight_grad_ = grads[0];
}

absl::Status GpuPrelu::Forward(GpuContext& c, const float* in, float* out,
                               int64_t n, Mode) {
  in_ = in;
  // NCHW: [N, C, positions] with a slope per channel; one shared slope
  // sees each sample as one channel.
  shape_ = num_parameters_ == 1
               ? gpu::PreluShape{n, 1, sample_size_}
               : gpu::PreluShape{n, num_parameters_, positions_};
  return gpu::PreluForward(shape_, in, weight_, out, c.stream());
}

absl::Status GpuPrelu::Backward(GpuContext& c, const float* dy, float* dx) {
  return gpu::PreluBackward(shape_, in_, weight_, dy, dx, weight_grad_,
                            c.stream());
}

}  // namespace cohort
