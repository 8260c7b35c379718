// exp for loops that must vectorise: libm's in double; in float a
// branch-free Cody-Waite reduction by ln 2 with Cephes' degree-6
// polynomial for exp on [-ln2/2, ln2/2], and 2^n assembled in the exponent
// bits (within 4e-7 relative of the exact value). glibc's expf is a scalar
// call, an order of magnitude slower per element than the arithmetic
// around it, and it keeps the loop scalar.
//
// Header-only, stateless, thread-safe.
#ifndef COHORT_KERNELS_FAST_EXP_H_
#define COHORT_KERNELS_FAST_EXP_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cohort {

inline double FastExp(double x) { return std::exp(x); }

// Clamped to [-87, 88], where expf neither underflows to a denormal nor
// overflows: exp(-inf) comes out as 1.6e-38 instead of 0, which no sum
// of probabilities notices.
inline __attribute__((always_inline)) float FastExp(float a) {
  const float lo = a > -87.0f ? a : -87.0f;
  const float x = lo < 88.0f ? lo : 88.0f;
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  // ln 2 in two parts, so that n * ln 2 subtracts exactly.
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace cohort

#endif  // COHORT_KERNELS_FAST_EXP_H_
