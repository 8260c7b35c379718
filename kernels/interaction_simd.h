// AVX2 vectors of float and double behind one interface, for the
// dot-interaction kernels (internal to kernels/interaction.cc): the kernels
// are written once over Simd<T> and instantiated for both types.
//
// Stateless; thread-safe.
#ifndef COHORT_KERNELS_INTERACTION_SIMD_H_
#define COHORT_KERNELS_INTERACTION_SIMD_H_

#include <immintrin.h>

#include <cstdint>

namespace cohort {
namespace interaction_internal {

template <typename T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m256;
  static constexpr int kLanes = 8;

  static V Zero() { return _mm256_setzero_ps(); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static V Load(const float* p, __m256i mask) {
    return _mm256_maskload_ps(p, mask);
  }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void Store(float* p, __m256i mask, V v) {
    _mm256_maskstore_ps(p, mask, v);
  }
  static V Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }

  // Mask of the first `n` (0..8) lanes.
  static __m256i FirstLanes(int64_t n) {
    static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                       0,  0,  0,  0,  0,  0,  0,  0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n));
  }

  // Lane k of the result is the sum of p[k]'s lanes. Each step adds pairs
  // of lanes of two vectors into one with two blends and one shuffle
  // (cheaper than hadd's two shuffles on the one shuffle port), halving the
  // vectors: 32-bit lanes, then 64-bit halves, then 128-bit halves.
  static V SumEach(const V p[8]) {
    V a[4], b[2];
    for (int k = 0; k < 4; ++k) {
      const V x = p[2 * k], y = p[2 * k + 1];
      a[k] =
          _mm256_add_ps(_mm256_blend_ps(x, y, 0xAA),
                        _mm256_permute_ps(_mm256_blend_ps(y, x, 0xAA), 0xB1));
    }
    for (int k = 0; k < 2; ++k) {
      const V x = a[2 * k], y = a[2 * k + 1];
      b[k] =
          _mm256_add_ps(_mm256_blend_ps(x, y, 0xCC),
                        _mm256_permute_ps(_mm256_blend_ps(y, x, 0xCC), 0x4E));
    }
    return _mm256_add_ps(_mm256_blend_ps(b[0], b[1], 0xF0),
                         _mm256_permute2f128_ps(b[0], b[1], 0x21));
  }
};

template <>
struct Simd<double> {
  using V = __m256d;
  static constexpr int kLanes = 4;

  static V Zero() { return _mm256_setzero_pd(); }
  static V Load(const double* p) { return _mm256_loadu_pd(p); }
  static V Load(const double* p, __m256i mask) {
    return _mm256_maskload_pd(p, mask);
  }
  static void Store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static void Store(double* p, __m256i mask, V v) {
    _mm256_maskstore_pd(p, mask, v);
  }
  static V Broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V Mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }

  // Mask of the first `n` (0..4) lanes.
  static __m256i FirstLanes(int64_t n) {
    static const int64_t kLanes[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 4 - n));
  }

  // Lane k of the result is the sum of p[k]'s lanes (as Simd<float>'s).
  static V SumEach(const V p[4]) {
    V a[2];
    for (int k = 0; k < 2; ++k) {
      const V x = p[2 * k], y = p[2 * k + 1];
      a[k] = _mm256_add_pd(_mm256_blend_pd(x, y, 0xA),
                           _mm256_permute_pd(_mm256_blend_pd(y, x, 0xA), 0x5));
    }
    return _mm256_add_pd(_mm256_blend_pd(a[0], a[1], 0xC),
                         _mm256_permute2f128_pd(a[0], a[1], 0x21));
  }
};

}  // namespace interaction_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_INTERACTION_SIMD_H_
