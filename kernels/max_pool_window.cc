#include "kernels/max_pool_window.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

namespace cohort {
namespace {

// Rows [h_lo, h_hi) of one plane's window starting at column w0 (clipped to
// the row): its first maximum, scanning rows then columns. Starting from
// the first element (not -inf) keeps a valid index even for an all -inf
// window.
template <typename T>
inline void MaxOfWindow(const Pool2dGeometry& g, const T* src, int64_t h_lo,
                        int64_t h_hi, int64_t w0, T* out, int32_t* argmax) {
  const int64_t w_lo = std::max<int64_t>(w0, 0);
  const int64_t w_hi = std::min(w0 + g.kernel, g.in_w);
  int64_t best_i = h_lo * g.in_w + w_lo;
  T best = src[best_i];
  for (int64_t h = h_lo; h < h_hi; ++h) {
    for (int64_t w = w_lo; w < w_hi; ++w) {
      const T v = src[h * g.in_w + w];
      if (v > best) best = v, best_i = h * g.in_w + w;
    }
  }
  *out = best;
  *argmax = static_cast<int32_t>(best_i);
}

// p[0], p[s], ..., p[7 s] for stride s = kStride (0: any, from `lanes`,
// the offsets 0, s, ..., 7 s). Reads nothing past p[7 s]: the last window
// of the last row of a plane may end its buffer.
template <int kStride>
inline __m256 LoadStrided(const float* p, __m256i lanes) {
  if constexpr (kStride == 1) {
    return _mm256_loadu_ps(p);
  } else if constexpr (kStride == 2) {
    // p0..p7 and p7..p14; per 128-bit half the even elements of the first
    // and the odd of the second give p0 p2 p8 p10 | p4 p6 p12 p14.
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 7);
    const __m256 mixed = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(mixed), 0xD8));
  } else {
    return _mm256_i32gather_ps(p, lanes, 4);
  }
}

// Outputs [ow, ow + 8) of output row rows [h_lo, h_hi), whose windows lie
// inside the row: lane j scans the window at column (ow + j) * stride -
// padding in the scalar order, replacing its maximum only when strictly
// greater.
template <int kStride>
inline void MaxOfWindows8(const Pool2dGeometry& g, const float* src,
                          int64_t h_lo, int64_t h_hi, int64_t ow, __m256i lanes,
                          float* out, int32_t* argmax) {
  const int64_t w0 = ow * g.stride - g.padding;
  __m256 best = LoadStrided<kStride>(src + h_lo * g.in_w + w0, lanes);
  __m256i best_i = _mm256_add_epi32(
      _mm256_set1_epi32(static_cast<int32_t>(h_lo * g.in_w + w0)), lanes);
  for (int64_t h = h_lo; h < h_hi; ++h) {
    for (int64_t kw = h == h_lo ? 1 : 0; kw < g.kernel; ++kw) {
      const int64_t at = h * g.in_w + w0 + kw;
      const __m256 v = LoadStrided<kStride>(src + at, lanes);
      const __m256 greater = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
      best = _mm256_blendv_ps(best, v, greater);
      const __m256i i =
          _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(at)), lanes);
      best_i = _mm256_castps_si256(_mm256_blendv_ps(
          _mm256_castsi256_ps(best_i), _mm256_castsi256_ps(i), greater));
    }
  }
  _mm256_storeu_ps(out, best);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(argmax), best_i);
}

// Output columns [first, last) whose windows lie wholly inside the row.
struct Interior {
  int64_t first = 0, last = 0;
};

Interior InteriorColumns(const Pool2dGeometry& g) {
  Interior c;
  c.first = std::min((g.padding + g.stride - 1) / g.stride, g.out_w);
  const int64_t fits = g.in_w - g.kernel + g.padding;
  c.last =
      fits < 0 ? c.first : std::clamp(fits / g.stride + 1, c.first, g.out_w);
  return c;
}

// One output row of one plane: the interior eight at a time where T is
// float, every other window alone.
template <typename T, int kStride>
void MaxPoolRow(const Pool2dGeometry& g, const Interior& inside, const T* src,
                int64_t oh, T* out, int32_t* argmax) {
  const int64_t h0 = oh * g.stride - g.padding;
  const int64_t h_lo = std::max<int64_t>(h0, 0);
  const int64_t h_hi = std::min(h0 + g.kernel, g.in_h);
  int64_t ow = 0;
  auto scalar_until = [&](int64_t end) {
    for (; ow < end; ++ow) {
      MaxOfWindow(g, src, h_lo, h_hi, ow * g.stride - g.padding, out + ow,
                  argmax + ow);
    }
  };
  scalar_until(inside.first);
  if constexpr (std::is_same_v<T, float>) {
    const int32_t s = static_cast<int32_t>(g.stride);
    const __m256i lanes = _mm256_mullo_epi32(
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(s));
    for (; ow + 8 <= inside.last; ow += 8) {
      MaxOfWindows8<kStride>(g, src, h_lo, h_hi, ow, lanes, out + ow,
                             argmax + ow);
    }
  }
  scalar_until(g.out_w);
}

template <typename T, int kStride>
void MaxPoolPlanes(const Pool2dGeometry& g, const T* in, T* out,
                   int32_t* argmax) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const Interior inside = InteriorColumns(g);
  for (int64_t p = 0; p < g.planes; ++p) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const int64_t o = p * out_plane + oh * g.out_w;
      MaxPoolRow<T, kStride>(g, inside, in + p * in_plane, oh, out + o,
                             argmax + o);
    }
  }
}

}  // namespace

template <typename T>
void MaxPoolWindows(const Pool2dGeometry& g, const T* in, T* out,
                    int32_t* argmax) {
  switch (g.stride) {
    case 1:
      return MaxPoolPlanes<T, 1>(g, in, out, argmax);
    case 2:
      return MaxPoolPlanes<T, 2>(g, in, out, argmax);
    default:
      return MaxPoolPlanes<T, 0>(g, in, out, argmax);
  }
}

template void MaxPoolWindows<float>(const Pool2dGeometry&, const float*, float*,
                                    int32_t*);
template void MaxPoolWindows<double>(const Pool2dGeometry&, const double*,
                                     double*, int32_t*);

}  // namespace cohort
