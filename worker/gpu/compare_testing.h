// Error measures for comparing the GPU engine with the CPU engine in tests.
// Stateless functions; safe from any thread.
//
// Why two: float rounding that differs by one ulp can put an activation on
// the other side of a ReLU (or a max-pool tie) on one device, and then a
// whole row of a weight gradient takes a different term. The largest
// single difference (max-norm) then says little about the rest, while the
// L2 norm of the difference over the whole vector stays small unless the
// mathematics differs. Single layers have few activations and are checked
// element by element; deep networks and training runs in L2.

#ifndef COHORT_WORKER_GPU_COMPARE_TESTING_H_
#define COHORT_WORKER_GPU_COMPARE_TESTING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace cohort {
namespace gpu_testing {

// max |a - b| / max |b| over the first `n` elements.
inline double MaxRelativeError(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// ||a - b|| / ||b|| (Euclidean norms) over the first `n` elements.
inline double L2RelativeError(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1e-60;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    scale += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / scale);
}

inline double L2RelativeError(const std::vector<float>& a,
                              const std::vector<float>& b) {
  return L2RelativeError(a.data(), b.data(),
                         static_cast<int64_t>(std::min(a.size(), b.size())));
}

// "max-norm X, L2 Y": printed by the tests so that a GPU run's log records
// how close the engines came, pass or fail.
inline std::string Errors(const float* a, const float* b, int64_t n) {
  return absl::StrFormat("max-norm %.3g, L2 %.3g", MaxRelativeError(a, b, n),
                         L2RelativeError(a, b, n));
}

inline std::string Errors(const std::vector<float>& a,
                          const std::vector<float>& b) {
  return Errors(a.data(), b.data(),
                static_cast<int64_t>(std::min(a.size(), b.size())));
}

}  // namespace gpu_testing
}  // namespace cohort

#endif  // COHORT_WORKER_GPU_COMPARE_TESTING_H_
