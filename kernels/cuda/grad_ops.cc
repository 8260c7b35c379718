#include "kernels/cuda/grad_ops.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/grad_ops_launch.h"

namespace cohort {
namespace gpu {
namespace {

absl::Status CheckBuffer(const char* what, const float* g, int64_t n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": negative length ", n));
  }
  if (n > 0 && g == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": null gradient of ", n, " floats"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ClampInPlace(float* g, int64_t n, float limit,
                          cudaStream_t stream) {
  RETURN_IF_ERROR(CheckBuffer("clamp", g, n));
  if (!(limit > 0) || std::isinf(limit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clamp: the limit must be finite and > 0, got ", limit));
  }
  if (n == 0) return absl::OkStatus();
  cuda_internal::LaunchClamp(g, n, limit, stream);
  return LaunchStatus("clamp");
}

absl::Status ClipToNormInPlace(float* g, int64_t n, const float* sum_squares,
                               double max_norm, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckBuffer("clip to norm", g, n));
  if (sum_squares == nullptr) {
    return absl::InvalidArgumentError("clip to norm: null sum of squares");
  }
  if (!(max_norm > 0) || std::isinf(max_norm)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clip to norm: max_norm must be finite and > 0, got ", max_norm));
  }
  if (n == 0) return absl::OkStatus();
  cuda_internal::LaunchClipToNorm(g, n, sum_squares, max_norm, stream);
  return LaunchStatus("clip to norm");
}

absl::Status AccumulateScaled(const float* g, int64_t n, float weight,
                              bool first, float* acc, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckBuffer("accumulate", g, n));
  RETURN_IF_ERROR(CheckBuffer("accumulate (sum)", acc, n));
  if (!(weight > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("accumulate: the weight must be > 0, got ", weight));
  }
  if (n == 0) return absl::OkStatus();
  cuda_internal::LaunchAccumulate(g, n, weight, first, acc, stream);
  return LaunchStatus("accumulate");
}

absl::Status FinishAccumulated(const float* acc, int64_t n, float weight,
                               float scale, float* g, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckBuffer("finish accumulated", g, n));
  RETURN_IF_ERROR(CheckBuffer("finish accumulated (sum)", acc, n));
  if (n == 0) return absl::OkStatus();
  cuda_internal::LaunchFinishAccumulated(acc, n, weight, scale, g, stream);
  return LaunchStatus("finish accumulated");
}

}  // namespace gpu
}  // namespace cohort
