// RowMax: the largest of a contiguous row, for the softmax kernels.
//
// One running maximum is a chain of dependent max operations, one element
// per operation's latency, and GCC does not vectorise that reduction without
// -ffinite-math-only; in attention's softmax rows it took three quarters of
// the time. RowMax keeps kLanes running maxima instead, which GCC turns
// into vector max instructions. The maximum of values that are not NaN is
// the same in any order, so the result is the one running maximum's.
//
// Header-only, stateless, thread-safe.
#ifndef COHORT_KERNELS_ROW_MAX_H_
#define COHORT_KERNELS_ROW_MAX_H_

#include <cstdint>
#include <limits>

namespace cohort {

// The largest of row[0, n); -inf when n is 0. NaNs are passed over.
template <typename T>
inline __attribute__((always_inline)) T RowMax(const T* row, int64_t n) {
  constexpr int64_t kLanes = 16;
  T lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) {
    lane[l] = -std::numeric_limits<T>::infinity();
  }
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      lane[l] = row[j + l] > lane[l] ? row[j + l] : lane[l];
    }
  }
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t l = 0; l < kLanes; ++l) mx = lane[l] > mx ? lane[l] : mx;
  for (; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  return mx;
}

}  // namespace cohort

#endif  // COHORT_KERNELS_ROW_MAX_H_
