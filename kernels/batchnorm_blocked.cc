#include "kernels/batchnorm_blocked.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/prefetch.h"

namespace cohort {
namespace {

// Every loop walks one (n, channel block) row of P * B contiguous elements
// in runs of kLanes. A run starts at a multiple of kLanes, which B divides,
// so lane j always holds channel j % B of the block: per-lane accumulators
// and coefficients stay in registers and no sum crosses lanes until the
// row ends. For B = 8 a run spans two positions, which doubles the
// independent accumulator chains (the add latency, not memory, bounds a
// single chain per lane).
//
// The lane loops use AVX2 intrinsics rather than plain loops over local
// arrays: GCC 12 at -O2 vectorizes such loops but keeps the accumulator
// arrays in memory, a load and a store per vector and run, which runs at
// less than half the speed of the register sums below.
constexpr int64_t kLanes = 16;

// AVX2 vectors of T and the operations the kernels need.
template <typename T>
struct Avx;

template <>
struct Avx<float> {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  // max(0, v) returns v when v is NaN, as std::max(v, 0) does.
  static V Relu(V v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }
  // max(v, 0) returns +0 when v is NaN or -0, as v > 0 ? v : 0 does.
  static V PositiveOrZero(V v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
  // v where r > 0, else +0; an ordered compare, so a NaN r gives 0.
  static V KeepWherePositive(V r, V v) {
    return _mm256_and_ps(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_GT_OQ), v);
  }
  // The eight lanes of v as two vectors of doubles.
  static void Widen(V v, __m256d* out) {
    out[0] = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    out[1] = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  }
};

template <>
struct Avx<double> {
  using V = __m256d;
  static constexpr int kWidth = 4;
  static V Load(const double* p) { return _mm256_loadu_pd(p); }
  static void Store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V Sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V Fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V Add(V a, V b) { return _mm256_add_pd(a, b); }
  static V Relu(V v) { return _mm256_max_pd(_mm256_setzero_pd(), v); }
  static V PositiveOrZero(V v) { return _mm256_max_pd(v, _mm256_setzero_pd()); }
  static V KeepWherePositive(V r, V v) {
    return _mm256_and_pd(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_GT_OQ), v);
  }
  static void Widen(V v, __m256d* out) { out[0] = v; }
};

// Vectors of T in one run, and vectors of double in one widened run.
template <typename T>
constexpr int kVecs = kLanes / Avx<T>::kWidth;
constexpr int kWide = kLanes / 4;

// lanes[j] = v[base + j % block]: a per-channel array spread over the lanes.
template <typename T>
void SpreadOverLanes(const T* v, int64_t base, int64_t block, T* lanes) {
  for (int64_t j = 0; j < kLanes; ++j) lanes[j] = v[base + j % block];
}

template <typename T>
inline void LoadLanes(const T* lanes, typename Avx<T>::V* v) {
#pragma GCC unroll 4
  for (int h = 0; h < kVecs<T>; ++h) {
    v[h] = Avx<T>::Load(lanes + h * Avx<T>::kWidth);
  }
}

// dy with kMask the gradient through the ReLU that NormalizeRow applied
// to fma(xc, s, t), xc = x - mean as it computed it: dy where that is > 0,
// else 0 (NaN included). The same operations on the same numbers give the
// forward pass's bits, so the mask is where its output is not > 0, and
// zeroing dy rather than skipping terms gives what a separate ReLU
// backward would feed the kernels, bit for bit.
template <typename T, bool kMask>
inline typename Avx<T>::V MaskedGrad(typename Avx<T>::V dy,
                                     typename Avx<T>::V xc,
                                     typename Avx<T>::V s,
                                     typename Avx<T>::V t) {
  using A = Avx<T>;
  if constexpr (kMask) {
    return A::KeepWherePositive(A::Fmadd(xc, s, t), dy);
  } else {
    return dy;
  }
}

// The scalar form of MaskedGrad, for the tails.
template <typename T, bool kMask>
inline T MaskedGrad(T dy, T xc, T s, T t) {
  if constexpr (kMask) {
    return std::fma(xc, s, t) > T(0) ? dy : T(0);
  } else {
    return dy;
  }
}

// The lanes of scale and shift a masked kernel reads (MaskedGrad); zeros,
// never read, without kMask.
template <typename T, bool kMask>
inline void LoadMaskLanes(const T* s, const T* t, typename Avx<T>::V* sv,
                          typename Avx<T>::V* tv) {
  if constexpr (kMask) {
    LoadLanes(s, sv);
    LoadLanes(t, tv);
  } else {
    for (int h = 0; h < kVecs<T>; ++h) sv[h] = tv[h] = typename Avx<T>::V{};
  }
}

// The run at x less k's lanes as doubles; the difference is taken in T, as
// kernels/batchnorm.cc does, then widened.
template <typename T>
inline void WidenDiffRun(const T* x, const typename Avx<T>::V* k,
                         __m256d* out) {
  using A = Avx<T>;
#pragma GCC unroll 4
  for (int h = 0; h < kVecs<T>; ++h) {
    A::Widen(A::Sub(A::Load(x + h * A::kWidth), k[h]),
             out + h * (kWide / kVecs<T>));
  }
}

// Per-lane s += v and q += v * w over one run.
inline void AccumulateRun(const __m256d* v, const __m256d* w, __m256d* s,
                          __m256d* q) {
#pragma GCC unroll 4
  for (int h = 0; h < kWide; ++h) {
    s[h] = _mm256_add_pd(s[h], v[h]);
    q[h] = _mm256_fmadd_pd(v[h], w[h], q[h]);
  }
}

// out[j] += acc's lane j, for the kLanes lanes.
inline void AddLanes(const __m256d* acc, double* out) {
#pragma GCC unroll 4
  for (int h = 0; h < kWide; ++h) {
    _mm256_storeu_pd(out + 4 * h,
                     _mm256_add_pd(_mm256_loadu_pd(out + 4 * h), acc[h]));
  }
}

// Prefetches the cache lines of the run kPrefetchBytes past p: the sums
// below only read, and a stream that is only read waits on memory without
// it (kernels/prefetch.h).
template <typename T>
inline void PrefetchRun(const T* p) {
  constexpr int64_t kLine = 64;
#pragma GCC unroll 2
  for (int64_t b = 0; b < kLanes * static_cast<int64_t>(sizeof(T));
       b += kLine) {
    PrefetchAhead(reinterpret_cast<const char*>(p) + b);
  }
}

// Per-lane sums of (x - k) and (x - k)^2 over one row of n elements, added
// to s and q.
template <typename T>
void ShiftedLaneSums(const T* x, int64_t n, const T* k, double* s, double* q) {
  typename Avx<T>::V kv[kVecs<T>];
  LoadLanes(k, kv);
  __m256d sv[kWide], qv[kWide];
#pragma GCC unroll 4
  for (int h = 0; h < kWide; ++h) sv[h] = qv[h] = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    PrefetchRun(x + i);
    __m256d v[kWide];
    WidenDiffRun(x + i, kv, v);
    AccumulateRun(v, v, sv, qv);
  }
  AddLanes(sv, s);
  AddLanes(qv, q);
  for (int64_t j = 0; i + j < n; ++j) {
    const double v = static_cast<double>(x[i + j] - k[j]);
    s[j] += v, q[j] += v * v;
  }
}

// Per-lane sums of dy and dy * (x - mu) over one row of n elements, added
// to q and s; dy masked as MaskedGrad does with the lanes of scale `sl` and
// shift `tl` (unread without kMask).
template <typename T, bool kMask>
void GradLaneSums(const T* dy, const T* x, int64_t n, const T* mu, const T* sl,
                  const T* tl, double* s, double* q) {
  using A = Avx<T>;
  typename A::V mv[kVecs<T>], sv[kVecs<T>], tv[kVecs<T>];
  LoadLanes(mu, mv);
  LoadMaskLanes<T, kMask>(sl, tl, sv, tv);
  __m256d sa[kWide], qa[kWide];
#pragma GCC unroll 4
  for (int h = 0; h < kWide; ++h) sa[h] = qa[h] = _mm256_setzero_pd();
  constexpr int kPerVec = kWide / kVecs<T>;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    PrefetchRun(dy + i);
    PrefetchRun(x + i);
    __m256d g[kWide], xc[kWide];
#pragma GCC unroll 4
    for (int h = 0; h < kVecs<T>; ++h) {
      const int64_t o = i + h * A::kWidth;
      const typename A::V d = A::Sub(A::Load(x + o), mv[h]);
      A::Widen(MaskedGrad<T, kMask>(A::Load(dy + o), d, sv[h], tv[h]),
               g + h * kPerVec);
      A::Widen(d, xc + h * kPerVec);
    }
    AccumulateRun(g, xc, sa, qa);
  }
  AddLanes(sa, s);
  AddLanes(qa, q);
  for (int64_t j = 0; i + j < n; ++j) {
    const T d = x[i + j] - mu[j];
    const T masked =
        kMask ? MaskedGrad<T, true>(dy[i + j], d, sl[j], tl[j]) : dy[i + j];
    const double g = static_cast<double>(masked);
    s[j] += g, q[j] += g * static_cast<double>(d);
  }
}

// y = (x - mu) * s + t (+ r with kSum), then ReLU with kRelu, over one row
// of n elements; r is unread without kSum. Each run is loaded before it is
// stored, so y may equal x or r. The ReLU of a plain row is max(0, v),
// NaN staying NaN; that of a sum is the separate ReLU's (kernels/
// elementwise.h) that the sum replaces, v > 0 ? v : +0, so that the block
// gives the bits of the steps in turn.
template <typename T, bool kRelu, bool kSum>
void NormalizeRow(const T* x, const T* r, int64_t n, const T* mu, const T* s,
                  const T* t, T* y) {
  using A = Avx<T>;
  typename A::V mv[kVecs<T>], sv[kVecs<T>], tv[kVecs<T>];
  LoadLanes(mu, mv);
  LoadLanes(s, sv);
  LoadLanes(t, tv);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma GCC unroll 4
    for (int h = 0; h < kVecs<T>; ++h) {
      const int64_t o = i + h * A::kWidth;
      typename A::V v = A::Fmadd(A::Sub(A::Load(x + o), mv[h]), sv[h], tv[h]);
      if constexpr (kSum) v = A::Add(v, A::Load(r + o));
      if constexpr (kRelu) v = kSum ? A::PositiveOrZero(v) : A::Relu(v);
      A::Store(y + o, v);
    }
  }
  for (int64_t j = 0; i + j < n; ++j) {
    T v = std::fma(x[i + j] - mu[j], s[j], t[j]);
    if constexpr (kSum) v += r[i + j];
    if constexpr (kRelu) v = kSum ? (v > T(0) ? v : T(0)) : std::max(v, T(0));
    y[i + j] = v;
  }
}

// dx = a * dy + b * (x - mu) + d over one row of n elements, dy masked as
// MaskedGrad does with the lanes of scale `sl` and shift `tl` (unread
// without kMask). Each run is loaded before it is stored, so dx may equal
// dy or x.
template <typename T, bool kMask>
void InputGradRow(const T* dy, const T* x, int64_t n, const T* mu, const T* sl,
                  const T* tl, const T* a, const T* b, const T* d, T* dx) {
  using A = Avx<T>;
  typename A::V mv[kVecs<T>], av[kVecs<T>], bv[kVecs<T>], dv[kVecs<T>];
  typename A::V sv[kVecs<T>], tv[kVecs<T>];
  LoadLanes(mu, mv);
  LoadLanes(a, av);
  LoadLanes(b, bv);
  LoadLanes(d, dv);
  LoadMaskLanes<T, kMask>(sl, tl, sv, tv);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma GCC unroll 4
    for (int h = 0; h < kVecs<T>; ++h) {
      const int64_t o = i + h * A::kWidth;
      const typename A::V xc = A::Sub(A::Load(x + o), mv[h]);
      const typename A::V g =
          MaskedGrad<T, kMask>(A::Load(dy + o), xc, sv[h], tv[h]);
      A::Store(dx + o, A::Fmadd(av[h], g, A::Fmadd(bv[h], xc, dv[h])));
    }
  }
  for (int64_t j = 0; i + j < n; ++j) {
    const T xc = x[i + j] - mu[j];
    const T g =
        kMask ? MaskedGrad<T, true>(dy[i + j], xc, sl[j], tl[j]) : dy[i + j];
    dx[i + j] = std::fma(a[j], g, std::fma(b[j], xc, d[j]));
  }
}

// Sets out[base, base + block) to the sums of their channels' lanes.
void FoldLanes(const double* lanes, int64_t base, int64_t block, double* out) {
  std::fill(out + base, out + base + block, 0.0);
  for (int64_t j = 0; j < kLanes; ++j) out[base + j % block] += lanes[j];
}

// Spreads block cb's scale and shift over the lanes when kMask.
template <typename T, bool kMask>
void SpreadMask(ActivationInput<T> relu, int64_t cb, int64_t bs, T* sl, T* tl) {
  if constexpr (kMask) {
    SpreadOverLanes(relu.scale, cb * bs, bs, sl);
    SpreadOverLanes(relu.shift, cb * bs, bs, tl);
  }
}

// BlockedGradSums with the mask chosen at compile time: the public
// function branches once, and the unmasked loops carry no trace of the
// mask (kept out of line, the two variants do not share registers).
template <typename T, bool kMask>
void GradSums(const BlockedLayout& l, const T* dy, const T* x,
              ActivationInput<T> relu, int64_t c0, int64_t c1, const T* mean,
              double* sum_dy, double* sum_dy_xc) {
  const int64_t bs = l.block, blocks = l.channels / bs;
  const int64_t row = l.spatial * bs;
  for (int64_t cb = c0 / bs; cb < c1 / bs; ++cb) {
    T mu[kLanes], sl[kLanes] = {}, tl[kLanes] = {};
    SpreadOverLanes(mean, cb * bs, bs, mu);
    SpreadMask<T, kMask>(relu, cb, bs, sl, tl);
    double s[kLanes] = {}, q[kLanes] = {};
    for (int64_t n = 0; n < l.batch; ++n) {
      const int64_t off = (n * blocks + cb) * row;
      GradLaneSums<T, kMask>(dy + off, x + off, row, mu, sl, tl, s, q);
    }
    FoldLanes(s, cb * bs, bs, sum_dy);
    FoldLanes(q, cb * bs, bs, sum_dy_xc);
  }
}

// BlockedInputGrad with the mask chosen at compile time.
template <typename T, bool kMask>
void InputGrad(const BlockedLayout& l, const T* dy, const T* x,
               ActivationInput<T> relu, int64_t c0, int64_t c1, const T* mean,
               const T* a, const T* b, const T* d, T* dx) {
  const int64_t bs = l.block, blocks = l.channels / bs;
  const int64_t row = l.spatial * bs;
  for (int64_t cb = c0 / bs; cb < c1 / bs; ++cb) {
    T mu[kLanes], al[kLanes], bl[kLanes], dl[kLanes];
    T sl[kLanes] = {}, tl[kLanes] = {};
    SpreadOverLanes(mean, cb * bs, bs, mu);
    SpreadOverLanes(a, cb * bs, bs, al);
    SpreadOverLanes(b, cb * bs, bs, bl);
    SpreadOverLanes(d, cb * bs, bs, dl);
    SpreadMask<T, kMask>(relu, cb, bs, sl, tl);
    for (int64_t n = 0; n < l.batch; ++n) {
      const int64_t off = (n * blocks + cb) * row;
      InputGradRow<T, kMask>(dy + off, x + off, row, mu, sl, tl, al, bl, dl,
                             dx + off);
    }
  }
}

}  // namespace

template <typename T>
void BlockedMeanVar(const BlockedLayout& l, const T* x, int64_t c0, int64_t c1,
                    double* mean, double* var) {
  const int64_t bs = l.block, blocks = l.channels / bs;
  const int64_t row = l.spatial * bs;
  const double inv = 1.0 / static_cast<double>(l.count());
  for (int64_t cb = c0 / bs; cb < c1 / bs; ++cb) {
    // Each channel's shift is its element at (n, p) = (0, 0).
    T k[kLanes];
    SpreadOverLanes(x + cb * row, 0, bs, k);
    double s[kLanes] = {}, q[kLanes] = {};
    for (int64_t n = 0; n < l.batch; ++n) {
      ShiftedLaneSums(x + (n * blocks + cb) * row, row, k, s, q);
    }
    const int64_t base = cb * bs;
    FoldLanes(s, base, bs, mean);
    FoldLanes(q, base, bs, var);
    for (int64_t j = 0; j < bs; ++j) {
      const double m = mean[base + j] * inv;
      var[base + j] = std::max(var[base + j] * inv - m * m, 0.0);
      mean[base + j] = static_cast<double>(k[j]) + m;
    }
  }
}

// Runs row(offset, mu, s, t) for every (sample, block) row of channels
// [c0, c1), with the block's per-channel values spread over the lanes.
template <typename T, typename Row>
void ForEachNormalizeRow(const BlockedLayout& l, int64_t c0, int64_t c1,
                         const T* mean, const T* scale, const T* shift,
                         const Row& row) {
  const int64_t bs = l.block, blocks = l.channels / bs;
  for (int64_t cb = c0 / bs; cb < c1 / bs; ++cb) {
    T mu[kLanes], s[kLanes], t[kLanes];
    SpreadOverLanes(mean, cb * bs, bs, mu);
    SpreadOverLanes(scale, cb * bs, bs, s);
    SpreadOverLanes(shift, cb * bs, bs, t);
    for (int64_t n = 0; n < l.batch; ++n) {
      row((n * blocks + cb) * l.spatial * bs, mu, s, t);
    }
  }
}

template <typename T>
void BlockedNormalize(const BlockedLayout& l, const T* x, int64_t c0,
                      int64_t c1, const T* mean, const T* scale, const T* shift,
                      bool relu, T* y) {
  const int64_t n = l.spatial * l.block;
  ForEachNormalizeRow(
      l, c0, c1, mean, scale, shift,
      [&](int64_t off, const T* mu, const T* s, const T* t) {
        if (relu) {
          NormalizeRow<T, true, false>(x + off, nullptr, n, mu, s, t, y + off);
        } else {
          NormalizeRow<T, false, false>(x + off, nullptr, n, mu, s, t, y + off);
        }
      });
}

template <typename T>
void BlockedNormalizeSum(const BlockedLayout& l, const T* x, const T* r,
                         int64_t c0, int64_t c1, const T* mean, const T* scale,
                         const T* shift, bool relu, T* y) {
  const int64_t n = l.spatial * l.block;
  ForEachNormalizeRow(
      l, c0, c1, mean, scale, shift,
      [&](int64_t off, const T* mu, const T* s, const T* t) {
        if (relu) {
          NormalizeRow<T, true, true>(x + off, r + off, n, mu, s, t, y + off);
        } else {
          NormalizeRow<T, false, true>(x + off, r + off, n, mu, s, t, y + off);
        }
      });
}

template <typename T>
void BlockedGradSums(const BlockedLayout& l, const T* dy, const T* x,
                     ActivationInput<NotDeduced<T>> relu, int64_t c0,
                     int64_t c1, const T* mean, double* sum_dy,
                     double* sum_dy_xc) {
  if (relu.scale != nullptr) {
    GradSums<T, true>(l, dy, x, relu, c0, c1, mean, sum_dy, sum_dy_xc);
  } else {
    GradSums<T, false>(l, dy, x, relu, c0, c1, mean, sum_dy, sum_dy_xc);
  }
}

template <typename T>
void BlockedInputGrad(const BlockedLayout& l, const T* dy, const T* x,
                      ActivationInput<NotDeduced<T>> relu, int64_t c0,
                      int64_t c1, const T* mean, const T* a, const T* b,
                      const T* d, T* dx) {
  if (relu.scale != nullptr) {
    InputGrad<T, true>(l, dy, x, relu, c0, c1, mean, a, b, d, dx);
  } else {
    InputGrad<T, false>(l, dy, x, relu, c0, c1, mean, a, b, d, dx);
  }
}

#define COHORT_INSTANTIATE(T)                                                \
  template void BlockedMeanVar<T>(const BlockedLayout&, const T*, int64_t,   \
                                  int64_t, double*, double*);                \
  template void BlockedNormalize<T>(const BlockedLayout&, const T*, int64_t, \
                                    int64_t, const T*, const T*, const T*,   \
                                    bool, T*);                               \
  template void BlockedNormalizeSum<T>(const BlockedLayout&, const T*,       \
                                       const T*, int64_t, int64_t, const T*, \
                                       const T*, const T*, bool, T*);        \
  template void BlockedGradSums<T>(const BlockedLayout&, const T*, const T*, \
                                   ActivationInput<T>, int64_t, int64_t,     \
                                   const T*, double*, double*);              \
  template void BlockedInputGrad<T>(                                         \
      const BlockedLayout&, const T*, const T*, ActivationInput<T>, int64_t, \
      int64_t, const T*, const T*, const T*, const T*, T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort
