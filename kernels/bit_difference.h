// For kernel tests that require the bits of another computation: where two
// arrays first differ bit for bit (NaNs and signed zeros included).
#ifndef COHORT_KERNELS_BIT_DIFFERENCE_H_
#define COHORT_KERNELS_BIT_DIFFERENCE_H_

#include <cstdint>
#include <cstring>
#include <vector>

namespace cohort {

// The index of the first element whose bits differ; the shorter length
// where one array ends early; -1 where they are the same.
template <typename T>
int64_t FirstBitDifference(const std::vector<T>& a, const std::vector<T>& b) {
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

}  // namespace cohort

#endif  // COHORT_KERNELS_BIT_DIFFERENCE_H_
