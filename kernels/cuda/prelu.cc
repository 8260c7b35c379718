#include "kernels/cuda/prelu.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/prelu_launch.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = prelu_internal;

absl::Status Invalid(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

absl::Status CheckShape(absl::string_view op, const PreluShape& s) {
  if (s.outer < 0 || s.channels < 1 || s.inner < 1) {
    return Invalid(
        op, absl::StrCat("inconsistent geometry: outer ", s.outer,
                         ", channels ", s.channels, ", inner ", s.inner));
  }
  return absl::OkStatus();
}

internal::PreluArgs Args(const PreluShape& s) {
  return {s.outer, s.channels, s.inner};
}

}  // namespace

absl::Status PreluForward(const PreluShape& s, const float* in,
                          const float* slope, float* out, cudaStream_t stream) {
  constexpr absl::string_view kOp = "prelu_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.outer == 0) return absl::OkStatus();
  if (in == nullptr || slope == nullptr || out == nullptr) {
    return Invalid(kOp, "null pointer");
  }
  internal::LaunchPreluForward(Args(s), in, slope, out, stream);
  return LaunchStatus(kOp);
}

absl::Status PreluBackward(const PreluShape& s, const float* in,
                           const float* slope, const float* grad_out,
                           float* grad_in, float* grad_slope,
                           cudaStream_t stream) {
  constexpr absl::string_view kOp = "prelu_backward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (in == nullptr || slope == nullptr || grad_out == nullptr ||
      grad_slope == nullptr) {
    return Invalid(kOp, "null pointer");
  }
  // Even an empty batch overwrites the slope gradient (with zeros).
  internal::LaunchPreluSlopeGrad(Args(s), in, grad_out, grad_slope, stream);
  RETURN_IF_ERROR(LaunchStatus(kOp));
  if (grad_in == nullptr || s.outer == 0) return absl::OkStatus();
  internal::LaunchPreluInputGrad(Args(s), in, slope, grad_out, grad_in, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
