#include "kernels/cuda/adaptive_pool.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/adaptive_pool_launch.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = adaptive_pool_internal;

absl::Status Invalid(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

// The limits of the spec's shape inference (common/layer_kinds/): they keep
// the window bounds' products such as (x + 1) * out far from overflow.
absl::Status CheckShape(absl::string_view op, const AdaptivePool2dShape& s) {
  if (s.planes < 0 || s.in_h < 1 || s.in_w < 1 || s.out_h < 1 || s.out_w < 1 ||
      s.in_h * s.in_w > INT32_MAX || s.out_h * s.out_w > INT32_MAX) {
    return Invalid(op, absl::StrCat("inconsistent geometry: in ", s.in_h, "x",
                                    s.in_w, ", out ", s.out_h, "x", s.out_w,
                                    ", planes ", s.planes));
  }
  return absl::OkStatus();
}

internal::AdaptivePoolArgs Args(const AdaptivePool2dShape& s) {
  return {s.planes, s.in_h, s.in_w, s.out_h, s.out_w};
}

}  // namespace

absl::Status AdaptiveAvgPool2dForward(const AdaptivePool2dShape& s,
                                      const float* in, float* out,
                                      cudaStream_t stream) {
  constexpr absl::string_view kOp = "adaptive_avgpool2d_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  if (in == nullptr || out == nullptr) return Invalid(kOp, "null pointer");
  internal::LaunchAdaptiveAvgPool2dForward(Args(s), in, out, stream);
  return LaunchStatus(kOp);
}

absl::Status AdaptiveAvgPool2dBackward(const AdaptivePool2dShape& s,
                                       const float* grad_out, float* grad_in,
                                       cudaStream_t stream) {
  constexpr absl::string_view kOp = "adaptive_avgpool2d_backward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  if (grad_out == nullptr || grad_in == nullptr) {
    return Invalid(kOp, "null pointer");
  }
  internal::LaunchAdaptiveAvgPool2dBackward(Args(s), grad_out, grad_in, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
