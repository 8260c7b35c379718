#include "kernels/batchnorm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace cohort {
namespace {

double HorizontalSum(__m256d v) {
  const __m128d s =
      _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// Widens 8 floats to two vectors of 4 doubles.
inline void Widen(__m256 v, __m256d* lo, __m256d* hi) {
  *lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  *hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

// Sums of (x - k) and (x - k)^2 over n contiguous elements. Four
// independent double accumulators per sum hide the add latency, so the loop
// runs at memory speed.
template <typename T>
void ShiftedSums(const T* x, int64_t n, T k, double* s, double* q) {
  int64_t i = 0;
  double ss = 0, qq = 0;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 kv = _mm256_set1_ps(k);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256d q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    for (; i + 16 <= n; i += 16) {
      __m256d a, b, c, d;
      Widen(_mm256_sub_ps(_mm256_loadu_ps(x + i), kv), &a, &b);
      Widen(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), kv), &c, &d);
      s0 = _mm256_add_pd(s0, a), q0 = _mm256_fmadd_pd(a, a, q0);
      s1 = _mm256_add_pd(s1, b), q1 = _mm256_fmadd_pd(b, b, q1);
      s2 = _mm256_add_pd(s2, c), q2 = _mm256_fmadd_pd(c, c, q2);
      s3 = _mm256_add_pd(s3, d), q3 = _mm256_fmadd_pd(d, d, q3);
    }
    ss = HorizontalSum(
        _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    qq = HorizontalSum(
        _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3)));
  }
  for (; i < n; ++i) {
    const double v = static_cast<double>(x[i] - k);
    ss += v, qq += v * v;
  }
  *s += ss, *q += qq;
}

// The mask of Passes<A> over the activation's inputs z.
template <FusedActivation A>
inline __m256 PassMask(__m256 z) {
  const __m256 pos = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GT_OQ);
  if constexpr (A == FusedActivation::kRelu6) {
    return _mm256_and_ps(pos,
                         _mm256_cmp_ps(z, _mm256_set1_ps(6.0f), _CMP_LT_OQ));
  }
  return pos;
}

// dy[i, i + 8), taken through activation A, whose input is xc * s + t (xc:
// x less the mean), as Normalize computes it: +0 where the gradient does
// not pass, as the separate layer writes.
template <FusedActivation A>
inline __m256 LoadGrad(const float* dy, int64_t i, __m256 xc, __m256 s,
                       __m256 t) {
  const __m256 g = _mm256_loadu_ps(dy + i);
  if constexpr (A == FusedActivation::kNone) return g;
  return _mm256_and_ps(PassMask<A>(_mm256_fmadd_ps(xc, s, t)), g);
}

// p[c], or 0 where activation A reads no scale or shift (null for none).
template <FusedActivation A, typename T>
inline T ParamAt(const T* p, int64_t c) {
  if constexpr (A == FusedActivation::kNone) return T(0);
  return p[c];
}

// dy taken through activation A, whose input is xc * s + t.
template <FusedActivation A, typename T>
inline T GradAt(T dy, T xc, T s, T t) {
  if constexpr (A == FusedActivation::kNone) return dy;
  return Passes<A>(std::fma(xc, s, t)) ? dy : T(0);
}

// Sums of dy and dy * (x - mu) over n contiguous elements, dy taken
// through activation A (input (x - mu) * s + t) first.
template <FusedActivation A, typename T>
void GradSumsRun(const T* dy, const T* x, int64_t n, T mu, T s, T t,
                 double* sum, double* sum_xc) {
  int64_t i = 0;
  double ss = 0, qq = 0;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 mv = _mm256_set1_ps(mu), sv = _mm256_set1_ps(s),
                 tv = _mm256_set1_ps(t);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256d q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    for (; i + 16 <= n; i += 16) {
      const __m256 xa = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
      const __m256 xb = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv);
      __m256d g0, g1, g2, g3, x0, x1, x2, x3;
      Widen(LoadGrad<A>(dy, i, xa, sv, tv), &g0, &g1);
      Widen(LoadGrad<A>(dy, i + 8, xb, sv, tv), &g2, &g3);
      Widen(xa, &x0, &x1);
      Widen(xb, &x2, &x3);
      s0 = _mm256_add_pd(s0, g0), q0 = _mm256_fmadd_pd(g0, x0, q0);
      s1 = _mm256_add_pd(s1, g1), q1 = _mm256_fmadd_pd(g1, x1, q1);
      s2 = _mm256_add_pd(s2, g2), q2 = _mm256_fmadd_pd(g2, x2, q2);
      s3 = _mm256_add_pd(s3, g3), q3 = _mm256_fmadd_pd(g3, x3, q3);
    }
    ss = HorizontalSum(
        _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    qq = HorizontalSum(
        _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3)));
  }
  for (; i < n; ++i) {
    const T xc = x[i] - mu;
    const double g = static_cast<double>(GradAt<A>(dy[i], xc, s, t));
    ss += g, qq += g * static_cast<double>(xc);
  }
  *sum += ss, *sum_xc += qq;
}

template <FusedActivation A, typename T>
void Normalize(const ChannelLayout& l, const T* x, const T* mean,
               const T* scale, const T* shift, T* y) {
  const int64_t c_n = l.channels;
  for (int64_t o = 0; o < l.outer; ++o) {
    if (l.inner == 1) {
      const T* xr = x + o * c_n;
      T* yr = y + o * c_n;
      for (int64_t c = 0; c < c_n; ++c) {
        yr[c] = Activate<A>(std::fma(xr[c] - mean[c], scale[c], shift[c]));
      }
      continue;
    }
    for (int64_t c = 0; c < c_n; ++c) {
      const T* xr = x + (o * c_n + c) * l.inner;
      T* yr = y + (o * c_n + c) * l.inner;
      const T mu = mean[c], s = scale[c], t = shift[c];
      for (int64_t i = 0; i < l.inner; ++i) {
        yr[i] = Activate<A>(std::fma(xr[i] - mu, s, t));
      }
    }
  }
}

template <FusedActivation A, typename T>
void GradSums(const ChannelLayout& l, const T* dy, const T* x,
              ActivationInput<T> z, const T* mean, double* sum_dy,
              double* sum_dy_xc) {
  const int64_t c_n = l.channels;
  std::fill(sum_dy, sum_dy + c_n, 0.0);
  std::fill(sum_dy_xc, sum_dy_xc + c_n, 0.0);
  if (l.inner == 1) {
    for (int64_t o = 0; o < l.outer; ++o) {
      const int64_t off = o * c_n;
      for (int64_t c = 0; c < c_n; ++c) {
        const T xc = x[off + c] - mean[c];
        const double gv = static_cast<double>(GradAt<A>(
            dy[off + c], xc, ParamAt<A>(z.scale, c), ParamAt<A>(z.shift, c)));
        sum_dy[c] += gv;
        sum_dy_xc[c] += gv * static_cast<double>(xc);
      }
    }
    return;
  }
  for (int64_t c = 0; c < c_n; ++c) {
    for (int64_t o = 0; o < l.outer; ++o) {
      const int64_t off = (o * c_n + c) * l.inner;
      GradSumsRun<A>(dy + off, x + off, l.inner, mean[c],
                     ParamAt<A>(z.scale, c), ParamAt<A>(z.shift, c), &sum_dy[c],
                     &sum_dy_xc[c]);
    }
  }
}

template <FusedActivation A, typename T>
void InputGrad(const ChannelLayout& l, const T* dy, const T* x,
               ActivationInput<T> z, const T* mean, const T* a, const T* b,
               const T* d, T* dx) {
  const int64_t c_n = l.channels;
  for (int64_t o = 0; o < l.outer; ++o) {
    if (l.inner == 1) {
      const int64_t off = o * c_n;
      for (int64_t c = 0; c < c_n; ++c) {
        const T xc = x[off + c] - mean[c];
        const T g = GradAt<A>(dy[off + c], xc, ParamAt<A>(z.scale, c),
                              ParamAt<A>(z.shift, c));
        dx[off + c] = a[c] * g + b[c] * xc + d[c];
      }
      continue;
    }
    for (int64_t c = 0; c < c_n; ++c) {
      const int64_t off = (o * c_n + c) * l.inner;
      const T ac = a[c], bc = b[c], mu = mean[c], dc = d[c];
      const T s = ParamAt<A>(z.scale, c), t = ParamAt<A>(z.shift, c);
      const T* g = dy + off;
      const T* xr = x + off;
      T* out = dx + off;
      for (int64_t i = 0; i < l.inner; ++i) {
        const T xc = xr[i] - mu;
        out[i] = ac * GradAt<A>(g[i], xc, s, t) + bc * xc + dc;
      }
    }
  }
}

}  // namespace

template <typename T>
void ChannelMeanVar(const ChannelLayout& l, const T* x, double* mean,
                    double* var) {
  const int64_t c_n = l.channels;
  std::fill(mean, mean + c_n, 0.0);
  std::fill(var, var + c_n, 0.0);
  if (l.inner == 1) {
    // Dense: the first row is the shift, and the inner loop runs across
    // channels so it vectorizes.
    for (int64_t o = 0; o < l.outer; ++o) {
      const T* row = x + o * c_n;
      for (int64_t c = 0; c < c_n; ++c) {
        const double v = static_cast<double>(row[c] - x[c]);
        mean[c] += v, var[c] += v * v;
      }
    }
  } else {
    for (int64_t c = 0; c < c_n; ++c) {
      for (int64_t o = 0; o < l.outer; ++o) {
        ShiftedSums(x + (o * c_n + c) * l.inner, l.inner, x[c * l.inner],
                    &mean[c], &var[c]);
      }
    }
  }
  const double inv = 1.0 / static_cast<double>(l.count());
  const int64_t shift_stride = l.inner == 1 ? 1 : l.inner;
  for (int64_t c = 0; c < c_n; ++c) {
    const double m = mean[c] * inv;
    var[c] = std::max(var[c] * inv - m * m, 0.0);
    mean[c] = static_cast<double>(x[c * shift_stride]) + m;
  }
}

template <typename T>
void ChannelNormalize(const ChannelLayout& l, const T* x, const T* mean,
                      const T* scale, const T* shift, FusedActivation act,
                      T* y) {
  WithActivation(act, [&](auto a) {
    Normalize<decltype(a)::value>(l, x, mean, scale, shift, y);
  });
}

template <typename T>
void ChannelGradSums(const ChannelLayout& l, const T* dy, const T* x,
                     ActivationInput<T> z, FusedActivation act, const T* mean,
                     double* sum_dy, double* sum_dy_xc) {
  WithActivation(act, [&](auto a) {
    GradSums<decltype(a)::value>(l, dy, x, z, mean, sum_dy, sum_dy_xc);
  });
}

template <typename T>
void ChannelInputGrad(const ChannelLayout& l, const T* dy, const T* x,
                      ActivationInput<T> z, FusedActivation act, const T* mean,
                      const T* a, const T* b, const T* d, T* dx) {
  WithActivation(act, [&](auto k) {
    InputGrad<decltype(k)::value>(l, dy, x, z, mean, a, b, d, dx);
  });
}

#define COHORT_INSTANTIATE(T)                                                 \
  template void ChannelMeanVar<T>(const ChannelLayout&, const T*, double*,    \
                                  double*);                                   \
  template void ChannelNormalize<T>(const ChannelLayout&, const T*, const T*, \
                                    const T*, const T*, FusedActivation, T*); \
  template void ChannelGradSums<T>(const ChannelLayout&, const T*, const T*,  \
                                   ActivationInput<T>, FusedActivation,       \
                                   const T*, double*, double*);               \
  template void ChannelInputGrad<T>(                                          \
      const ChannelLayout&, const T*, const T*, ActivationInput<T>,           \
      FusedActivation, const T*, const T*, const T*, const T*, T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort
