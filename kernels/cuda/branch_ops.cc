#include "kernels/cuda/branch_ops.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cuda/branch_ops_launch.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = branch_ops_internal;

absl::Status Invalid(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

// Checks the geometry and pointers of a per-plane kernel; *empty when
// there is nothing to launch.
absl::Status CheckPlanes(absl::string_view op, const void* a, const void* b,
                         int64_t planes, int64_t plane, bool* empty) {
  if (planes < 0 || plane < 1) {
    return Invalid(
        op, absl::StrCat("bad geometry: ", planes, " planes of ", plane));
  }
  *empty = planes == 0;
  if (!*empty && (a == nullptr || b == nullptr)) {
    return Invalid(op, "null buffer");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MultiplyInPlace(const float* x, float* y, int64_t n,
                             cudaStream_t stream) {
  constexpr absl::string_view kOp = "branch_multiply";
  if (n < 0) return Invalid(kOp, "negative element count");
  if (n == 0) return absl::OkStatus();
  if (x == nullptr || y == nullptr) return Invalid(kOp, "null buffer");
  internal::LaunchMultiplyInPlace(x, y, n, stream);
  return LaunchStatus(kOp);
}

absl::Status ScalePlanes(const float* scale, float* y, int64_t planes,
                         int64_t plane, cudaStream_t stream) {
  constexpr absl::string_view kOp = "branch_scale_planes";
  bool empty = false;
  absl::Status s = CheckPlanes(kOp, scale, y, planes, plane, &empty);
  if (!s.ok() || empty) return s;
  internal::LaunchScalePlanes(scale, y, planes, plane, stream);
  return LaunchStatus(kOp);
}

absl::Status SumPlanes(const float* x, float* out, int64_t planes,
                       int64_t plane, cudaStream_t stream) {
  constexpr absl::string_view kOp = "branch_sum_planes";
  bool empty = false;
  absl::Status s = CheckPlanes(kOp, x, out, planes, plane, &empty);
  if (!s.ok() || empty) return s;
  internal::LaunchSumPlanes(x, out, planes, plane, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
