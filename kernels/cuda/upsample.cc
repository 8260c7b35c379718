#include "kernels/cuda/upsample.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/upsample_launch.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = upsample_internal;

absl::Status Invalid(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

absl::Status CheckShape(absl::string_view op, const UpsampleShape& s) {
  if (s.planes < 0 || s.in_h < 1 || s.in_w < 1 || s.scale < 1) {
    return Invalid(
        op, absl::StrCat("inconsistent geometry: in ", s.in_h, "x", s.in_w,
                         ", scale ", s.scale, ", planes ", s.planes));
  }
  return absl::OkStatus();
}

internal::UpsampleArgs Args(const UpsampleShape& s) {
  return {s.planes, s.in_h, s.in_w, s.scale, s.bilinear};
}

}  // namespace

absl::Status UpsampleForward(const UpsampleShape& s, const float* in,
                             float* out, cudaStream_t stream) {
  constexpr absl::string_view kOp = "upsample_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  if (in == nullptr || out == nullptr) return Invalid(kOp, "null pointer");
  internal::LaunchUpsampleForward(Args(s), in, out, stream);
  return LaunchStatus(kOp);
}

absl::Status UpsampleBackward(const UpsampleShape& s, const float* grad_out,
                              float* grad_in, cudaStream_t stream) {
  constexpr absl::string_view kOp = "upsample_backward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  if (grad_out == nullptr || grad_in == nullptr) {
    return Invalid(kOp, "null pointer");
  }
  internal::LaunchUpsampleBackward(Args(s), grad_out, grad_in, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
