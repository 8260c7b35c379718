#include "kernels/cuda/softmax.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/softmax_launch.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = softmax_internal;

absl::Status Invalid(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

absl::Status CheckShape(absl::string_view op, const SoftmaxShape& s) {
  if (s.outer < 0 || s.axis < 1 || s.inner < 1) {
    return Invalid(op, absl::StrCat("inconsistent geometry: outer ", s.outer,
                                    ", axis ", s.axis, ", inner ", s.inner));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SoftmaxForward(const SoftmaxShape& s, const float* in, float* out,
                            cudaStream_t stream) {
  constexpr absl::string_view kOp = "softmax_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.outer == 0) return absl::OkStatus();
  if (in == nullptr || out == nullptr) return Invalid(kOp, "null pointer");
  internal::LaunchSoftmaxForward({s.outer, s.axis, s.inner}, in, out, stream);
  return LaunchStatus(kOp);
}

absl::Status SoftmaxBackward(const SoftmaxShape& s, const float* in,
                             const float* grad_out, float* grad_in,
                             cudaStream_t stream) {
  constexpr absl::string_view kOp = "softmax_backward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.outer == 0) return absl::OkStatus();
  if (in == nullptr || grad_out == nullptr || grad_in == nullptr) {
    return Invalid(kOp, "null pointer");
  }
  internal::LaunchSoftmaxBackward({s.outer, s.axis, s.inner}, in, grad_out,
                                  grad_in, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
