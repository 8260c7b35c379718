#include "kernels/pool.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/max_pool_window.h"

namespace cohort {
namespace {

// Output columns [j, j + 8) of a 2x2 stride-2 pool in AVX2 lanes. The even/odd
// split of 16 input columns leaves the outputs in the lane order
// 0 1 4 5 2 3 6 7; kPermOffsets are their input columns in that order, and
// one 64-bit permute restores the natural order at the end.
constexpr int kPermOffsets[8] = {0, 2, 8, 10, 4, 6, 12, 14};
constexpr int kUnpermute = 0xD8;  // 64-bit units 0, 2, 1, 3

// All-ones in the lanes below `count` (clamped to [0, 8]).
inline __m256i LaneMask(int64_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int32_t c = static_cast<int32_t>(count < 0 ? 0 : count > 8 ? 8 : count);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), lanes);
}

// Stores lanes [0, n) of v, 1 <= n <= 8, with at most two overlapping plain
// stores: AVX2's masked store is slow on some CPUs (microcoded on AMD), and
// n is the same for every row of a tensor, so the branches predict.
inline void StoreFirst(float* dst, __m256 v, int64_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int32_t n32 = static_cast<int32_t>(n);
  if (n == 8) {
    _mm256_storeu_ps(dst, v);
  } else if (n >= 4) {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    const __m256 last = _mm256_permutevar8x32_ps(
        v, _mm256_add_epi32(lanes, _mm256_set1_epi32(n32 - 4)));
    _mm_storeu_ps(dst + n - 4, _mm256_castps256_ps128(last));
  } else if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(dst), _mm256_castps256_ps128(v));
    const __m256 last = _mm256_permutevar8x32_ps(
        v, _mm256_add_epi32(lanes, _mm256_set1_epi32(n32 - 2)));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + n - 2),
                  _mm256_castps256_ps128(last));
  } else if (n == 1) {
    _mm_store_ss(dst, _mm256_castps256_ps128(v));
  }
}

// Lanes [0, n) of the 16 lanes (lo, hi), 0 <= n <= 16.
inline void StoreFirst16(float* dst, __m256 lo, __m256 hi, int64_t n) {
  if (n <= 8) return StoreFirst(dst, lo, n);
  _mm256_storeu_ps(dst, lo);
  StoreFirst(dst + 8, hi, n - 8);
}

template <bool kTail>
inline __m256 Load(const float* p, __m256i mask) {
  if constexpr (kTail) return _mm256_maskload_ps(p, mask);
  return _mm256_loadu_ps(p);
}

// Outputs [j, j + 8) of one row, or the first `rest` of them when kTail:
// masked loads and short stores then keep the tail in vector code, because
// compiled scalar compare-and-select branches, and on random data those
// branches mispredict (it measured several times slower on 10x10 planes).
template <bool kTail>
inline void MaxPool2x2Block(const float* top, const float* bot, int64_t j,
                            int64_t rest, int32_t in_w, int32_t base,
                            float* out, int32_t* idx) {
  const __m256i m0 = LaneMask(2 * rest), m1 = LaneMask(2 * rest - 8);
  const __m256 t0 = Load<kTail>(top + 2 * j, m0);
  const __m256 t1 = Load<kTail>(top + 2 * j + 8, m1);
  const __m256 b0 = Load<kTail>(bot + 2 * j, m0);
  const __m256 b1 = Load<kTail>(bot + 2 * j + 8, m1);
  const __m256 a = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 b = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 c = _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 d = _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
  // Strict comparisons keep the first maximum, as the scalar scan does.
  const __m256 gt_ab = _mm256_cmp_ps(b, a, _CMP_GT_OQ);
  const __m256 gt_cd = _mm256_cmp_ps(d, c, _CMP_GT_OQ);
  const __m256 m_ab = _mm256_blendv_ps(a, b, gt_ab);
  const __m256 m_cd = _mm256_blendv_ps(c, d, gt_cd);
  const __m256 gt = _mm256_cmp_ps(m_cd, m_ab, _CMP_GT_OQ);
  const __m256 m = _mm256_blendv_ps(m_ab, m_cd, gt);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i i_ab = _mm256_and_si256(_mm256_castps_si256(gt_ab), one);
  const __m256i i_cd =
      _mm256_add_epi32(_mm256_set1_epi32(in_w),
                       _mm256_and_si256(_mm256_castps_si256(gt_cd), one));
  const __m256i i = _mm256_blendv_epi8(i_ab, i_cd, _mm256_castps_si256(gt));
  const __m256i pos = _mm256_add_epi32(
      _mm256_set1_epi32(base + 2 * static_cast<int32_t>(j)),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPermOffsets)));
  const __m256 best_v =
      _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), kUnpermute));
  const __m256i best_i =
      _mm256_permute4x64_epi64(_mm256_add_epi32(pos, i), kUnpermute);
  if constexpr (kTail) {
    StoreFirst(out + j, best_v, rest);
    StoreFirst(reinterpret_cast<float*>(idx + j), _mm256_castsi256_ps(best_i),
               rest);
  } else {
    _mm256_storeu_ps(out + j, best_v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + j), best_i);
  }
}

// One output row of the 2x2 stride-2 pool: the hot case (LeNet). The scalar
// loop (double, for gradient checks) plays the same tournament as the
// vector code.
template <typename T>
void MaxPool2x2Row(const T* top, const T* bot, int64_t out_w, int32_t in_w,
                   int32_t base, T* out, int32_t* idx) {
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; j + 8 <= out_w; j += 8) {
      MaxPool2x2Block<false>(top, bot, j, 8, in_w, base, out, idx);
    }
    if (j < out_w) {
      MaxPool2x2Block<true>(top, bot, j, out_w - j, in_w, base, out, idx);
    }
    return;
  }
  for (; j < out_w; ++j) {
    const T a = top[2 * j], b = top[2 * j + 1];
    const T c = bot[2 * j], d = bot[2 * j + 1];
    const T m_ab = b > a ? b : a, m_cd = d > c ? d : c;
    const int32_t i_ab = b > a ? 1 : 0, i_cd = d > c ? in_w + 1 : in_w;
    out[j] = m_cd > m_ab ? m_cd : m_ab;
    idx[j] = base + 2 * static_cast<int32_t>(j) + (m_cd > m_ab ? i_cd : i_ab);
  }
}

template <typename T>
void MaxPool2x2Forward(const Pool2dGeometry& g, const T* in, T* out,
                       int32_t* argmax) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int32_t in_w = static_cast<int32_t>(g.in_w);
  for (int64_t p = 0; p < g.planes; ++p) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const T* top = in + p * in_plane + 2 * oh * g.in_w;
      const int64_t o = p * out_plane + oh * g.out_w;
      MaxPool2x2Row(top, top + g.in_w, g.out_w, in_w,
                    static_cast<int32_t>(2 * oh * g.in_w), out + o, argmax + o);
    }
  }
}

// Writes all four inputs under outputs [j, j + 8) (or the first `rest`):
// the gradient where the argmax is, zero elsewhere, so the 2x2 backward
// needs no separate zeroing pass.
template <bool kTail>
inline void MaxUnpool2x2Block(const float* grad_out, const int32_t* idx,
                              int64_t j, int64_t rest, int32_t in_w,
                              int32_t base, float* top, float* bot) {
  const __m256i mask = LaneMask(rest);
  __m256 gv;
  __m256i iv;
  if constexpr (kTail) {
    gv = _mm256_maskload_ps(grad_out + j, mask);
    iv = _mm256_maskload_epi32(idx + j, mask);
  } else {
    gv = _mm256_loadu_ps(grad_out + j);
    iv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + j));
  }
  // Into the lane order of the forward pass, which unpack undoes.
  gv =
      _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(gv), kUnpermute));
  iv = _mm256_permute4x64_epi64(iv, kUnpermute);
  const __m256i pos = _mm256_add_epi32(
      _mm256_set1_epi32(base + 2 * static_cast<int32_t>(j)),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPermOffsets)));
  const __m256i k = _mm256_sub_epi32(iv, pos);
  auto where = [&](int32_t at) {
    return _mm256_and_ps(
        _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(at))), gv);
  };
  const __m256 a = where(0), b = where(1), c = where(in_w), d = where(in_w + 1);
  if constexpr (kTail) {
    StoreFirst16(top + 2 * j, _mm256_unpacklo_ps(a, b),
                 _mm256_unpackhi_ps(a, b), 2 * rest);
    StoreFirst16(bot + 2 * j, _mm256_unpacklo_ps(c, d),
                 _mm256_unpackhi_ps(c, d), 2 * rest);
  } else {
    _mm256_storeu_ps(top + 2 * j, _mm256_unpacklo_ps(a, b));
    _mm256_storeu_ps(top + 2 * j + 8, _mm256_unpackhi_ps(a, b));
    _mm256_storeu_ps(bot + 2 * j, _mm256_unpacklo_ps(c, d));
    _mm256_storeu_ps(bot + 2 * j + 8, _mm256_unpackhi_ps(c, d));
  }
}

template <typename T>
void MaxUnpool2x2Row(const T* grad_out, const int32_t* idx, int64_t out_w,
                     int32_t in_w, int32_t base, T* top, T* bot) {
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; j + 8 <= out_w; j += 8) {
      MaxUnpool2x2Block<false>(grad_out, idx, j, 8, in_w, base, top, bot);
    }
    if (j < out_w) {
      MaxUnpool2x2Block<true>(grad_out, idx, j, out_w - j, in_w, base, top,
                              bot);
    }
    return;
  }
  for (; j < out_w; ++j) {
    const int32_t k = idx[j] - base - 2 * static_cast<int32_t>(j);
    const T v = grad_out[j];
    top[2 * j] = k == 0 ? v : T(0);
    top[2 * j + 1] = k == 1 ? v : T(0);
    bot[2 * j] = k == in_w ? v : T(0);
    bot[2 * j + 1] = k == in_w + 1 ? v : T(0);
  }
}

template <typename T>
void MaxPool2x2Backward(const Pool2dGeometry& g, const T* grad_out,
                        const int32_t* argmax, T* grad_in) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int64_t used_w = 2 * g.out_w, used_h = 2 * g.out_h;
  const int32_t in_w = static_cast<int32_t>(g.in_w);
  for (int64_t p = 0; p < g.planes; ++p) {
    T* plane = grad_in + p * in_plane;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      T* top = plane + 2 * oh * g.in_w;
      const int64_t o = p * out_plane + oh * g.out_w;
      MaxUnpool2x2Row(grad_out + o, argmax + o, g.out_w, in_w,
                      static_cast<int32_t>(2 * oh * g.in_w), top, top + g.in_w);
      // An odd width leaves a column no window covers.
      std::fill(top + used_w, top + g.in_w, T(0));
      std::fill(top + g.in_w + used_w, top + 2 * g.in_w, T(0));
    }
    std::fill(plane + used_h * g.in_w, plane + in_plane, T(0));
  }
}

bool Is2x2Stride2(const Pool2dGeometry& g) {
  return g.kernel == 2 && g.stride == 2 && g.padding == 0;
}

}  // namespace

template <typename T>
void MaxPool2dForward(const Pool2dGeometry& g, const T* in, T* out,
                      int32_t* argmax) {
  if (Is2x2Stride2(g)) {
    MaxPool2x2Forward(g, in, out, argmax);
  } else {
    MaxPoolWindows(g, in, out, argmax);
  }
}

template <typename T>
void MaxPool2dBackward(const Pool2dGeometry& g, const T* grad_out,
                       const int32_t* argmax, T* grad_in) {
  // Rows narrower than one vector cost more per row than the scatter below
  // costs per plane (measured on LeNet's 10x10 planes).
  if (Is2x2Stride2(g) && g.out_w >= 8) {
    MaxPool2x2Backward(g, grad_out, argmax, grad_in);
    return;
  }
  // Plane by plane, so the scatter finds the zeroed plane still in L1.
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < g.planes; ++p) {
    T* dst = grad_in + p * in_plane;
    std::fill(dst, dst + in_plane, T(0));
    const T* src = grad_out + p * out_plane;
    const int32_t* idx = argmax + p * out_plane;
    for (int64_t o = 0; o < out_plane; ++o) dst[idx[o]] += src[o];
  }
}

template <typename T>
void AvgPool2dForward(const Pool2dGeometry& g, const T* in, T* out) {
  const int64_t in_plane = g.in_h * g.in_w;
  const T inv = T(1) / static_cast<T>(g.kernel * g.kernel);
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* src = in + p * in_plane;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const int64_t h0 = oh * g.stride - g.padding;
      const int64_t h_lo = std::max<int64_t>(h0, 0);
      const int64_t h_hi = std::min(h0 + g.kernel, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t w0 = ow * g.stride - g.padding;
        const int64_t w_lo = std::max<int64_t>(w0, 0);
        const int64_t w_hi = std::min(w0 + g.kernel, g.in_w);
        T sum = 0;
        for (int64_t h = h_lo; h < h_hi; ++h) {
          for (int64_t w = w_lo; w < w_hi; ++w) sum += src[h * g.in_w + w];
        }
        *out++ = sum * inv;
      }
    }
  }
}

template <typename T>
void AvgPool2dBackward(const Pool2dGeometry& g, const T* grad_out, T* grad_in) {
  const int64_t in_plane = g.in_h * g.in_w;
  const T inv = T(1) / static_cast<T>(g.kernel * g.kernel);
  std::fill(grad_in, grad_in + g.planes * in_plane, T(0));
  for (int64_t p = 0; p < g.planes; ++p) {
    T* dst = grad_in + p * in_plane;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const int64_t h0 = oh * g.stride - g.padding;
      const int64_t h_lo = std::max<int64_t>(h0, 0);
      const int64_t h_hi = std::min(h0 + g.kernel, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t w0 = ow * g.stride - g.padding;
        const int64_t w_lo = std::max<int64_t>(w0, 0);
        const int64_t w_hi = std::min(w0 + g.kernel, g.in_w);
        const T v = *grad_out++ * inv;
        for (int64_t h = h_lo; h < h_hi; ++h) {
          for (int64_t w = w_lo; w < w_hi; ++w) dst[h * g.in_w + w] += v;
        }
      }
    }
  }
}

template <typename T>
void GlobalAvgPoolForward(int64_t c, int64_t n, int64_t p, const T* in,
                          T* out) {
  const T inv = T(1) / static_cast<T>(p);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t ni = 0; ni < n; ++ni) {
      const T* src = in + (ci * n + ni) * p;
      T sum = 0;
      for (int64_t i = 0; i < p; ++i) sum += src[i];
      out[ni * c + ci] = sum * inv;
    }
  }
}

template <typename T>
void GlobalAvgPoolBackward(int64_t c, int64_t n, int64_t p, const T* grad_out,
                           T* grad_in) {
  const T inv = T(1) / static_cast<T>(p);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t ni = 0; ni < n; ++ni) {
      T* dst = grad_in + (ci * n + ni) * p;
      std::fill(dst, dst + p, grad_out[ni * c + ci] * inv);
    }
  }
}

#define COHORT_INSTANTIATE(T)                                                 \
  template void MaxPool2dForward<T>(const Pool2dGeometry&, const T*, T*,      \
                                    int32_t*);                                \
  template void MaxPool2dBackward<T>(const Pool2dGeometry&, const T*,         \
                                     const int32_t*, T*);                     \
  template void AvgPool2dForward<T>(const Pool2dGeometry&, const T*, T*);     \
  template void AvgPool2dBackward<T>(const Pool2dGeometry&, const T*, T*);    \
  template void GlobalAvgPoolForward<T>(int64_t, int64_t, int64_t, const T*,  \
                                        T*);                                  \
  template void GlobalAvgPoolBackward<T>(int64_t, int64_t, int64_t, const T*, \
                                         T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort
