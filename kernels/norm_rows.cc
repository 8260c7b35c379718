#include "kernels/norm_rows.h"

#include <immintrin.h>

#include <cmath>

namespace cohort {
namespace {

// Elements per loop step: four vectors of four doubles, one accumulator
// each per sum.
constexpr int64_t kStep = 16;
constexpr int kVecs = 4;

// Four elements of T as doubles.
inline __m256d Load4(const float* p) {
  return _mm256_cvtps_pd(_mm_loadu_ps(p));
}
inline __m256d Load4(const double* p) { return _mm256_loadu_pd(p); }

inline void Zero(__m256d* acc) {
#pragma GCC unroll 4
  for (int k = 0; k < kVecs; ++k) acc[k] = _mm256_setzero_pd();
}

// The accumulators' sum, in one fixed order.
inline double Fold(const __m256d* acc) {
  const __m256d s = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]),
                                  _mm256_add_pd(acc[2], acc[3]));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, s);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

}  // namespace

template <typename T>
double RowSum(const T* x, int64_t n) {
  __m256d acc[kVecs];
  Zero(acc);
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
#pragma GCC unroll 4
    for (int k = 0; k < kVecs; ++k) {
      acc[k] = _mm256_add_pd(acc[k], Load4(x + i + 4 * k));
    }
  }
  double s = Fold(acc);
  for (; i < n; ++i) s += x[i];
  return s;
}

template <typename T>
double RowSquaredDeviations(const T* x, int64_t n, double mean) {
  const __m256d m = _mm256_set1_pd(mean);
  __m256d acc[kVecs];
  Zero(acc);
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
#pragma GCC unroll 4
    for (int k = 0; k < kVecs; ++k) {
      const __m256d d = _mm256_sub_pd(Load4(x + i + 4 * k), m);
      acc[k] = _mm256_fmadd_pd(d, d, acc[k]);
    }
  }
  double s = Fold(acc);
  for (; i < n; ++i) {
    const double d = x[i] - mean;
    s += d * d;
  }
  return s;
}

namespace {

// The parameter gradients' terms of element o: dw += dy * xh (one fused
// multiply-add, in the vectors and the tails alike, so that a row cut
// anywhere gives the same bits) and db += dy.
inline void AddParamTerms(__m256d d, __m256d xh, double* dw, double* db) {
  _mm256_storeu_pd(dw, _mm256_fmadd_pd(d, xh, _mm256_loadu_pd(dw)));
  _mm256_storeu_pd(db, _mm256_add_pd(_mm256_loadu_pd(db), d));
}

// Sums of g and g * xh, g = dy * w[p] with kWeighted, else dy; the
// parameter terms added into dw and db unless dw is null.
template <bool kWeighted, typename T>
RowGradSums GradSums(const T* x, const T* dy, const T* w, int64_t n,
                     double mean, double invstd, double* dw, double* db) {
  const __m256d m = _mm256_set1_pd(mean), is = _mm256_set1_pd(invstd);
  __m256d g[kVecs], gx[kVecs];
  Zero(g);
  Zero(gx);
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
#pragma GCC unroll 4
    for (int k = 0; k < kVecs; ++k) {
      const int64_t o = i + 4 * k;
      const __m256d xh = _mm256_mul_pd(_mm256_sub_pd(Load4(x + o), m), is);
      const __m256d d = Load4(dy + o);
      __m256d gy = d;
      if constexpr (kWeighted) gy = _mm256_mul_pd(d, Load4(w + o));
      g[k] = _mm256_add_pd(g[k], gy);
      gx[k] = _mm256_fmadd_pd(gy, xh, gx[k]);
      if (dw != nullptr) AddParamTerms(d, xh, dw + o, db + o);
    }
  }
  RowGradSums s{Fold(g), Fold(gx)};
  for (; i < n; ++i) {
    const double xh = (x[i] - mean) * invstd;
    double gy = dy[i];
    if constexpr (kWeighted) gy *= w[i];
    s.g += gy;
    s.g_xh += gy * xh;
    if (dw != nullptr) {
      dw[i] = std::fma(static_cast<double>(dy[i]), xh, dw[i]);
      db[i] += dy[i];
    }
  }
  return s;
}

}  // namespace

template <typename T>
RowGradSums RowGradientSums(const T* x, const T* dy, int64_t n, double mean,
                            double invstd) {
  return GradSums<false, T>(x, dy, nullptr, n, mean, invstd, nullptr, nullptr);
}

template <typename T>
RowGradSums RowGradientSumsPerElement(const T* x, const T* dy, const T* w,
                                      int64_t n, double mean, double invstd,
                                      double* dw, double* db) {
  return GradSums<true, T>(x, dy, w, n, mean, invstd, dw, db);
}

template <typename T>
void AddRowParamGrads(const T* x, const T* dy, int64_t n, double mean,
                      double invstd, double* dw, double* db) {
  const __m256d m = _mm256_set1_pd(mean), is = _mm256_set1_pd(invstd);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d xh = _mm256_mul_pd(_mm256_sub_pd(Load4(x + i), m), is);
    AddParamTerms(Load4(dy + i), xh, dw + i, db + i);
  }
  for (; i < n; ++i) {
    const double xh = (x[i] - mean) * invstd;
    dw[i] = std::fma(static_cast<double>(dy[i]), xh, dw[i]);
    db[i] += dy[i];
  }
}

#define COHORT_INSTANTIATE(T)                                                  \
  template double RowSum<T>(const T*, int64_t);                                \
  template double RowSquaredDeviations<T>(const T*, int64_t, double);          \
  template RowGradSums RowGradientSums<T>(const T*, const T*, int64_t, double, \
                                          double);                             \
  template void AddRowParamGrads<T>(const T*, const T*, int64_t, double,       \
                                    double, double*, double*);                 \
  template RowGradSums RowGradientSumsPerElement<T>(const T*, const T*,        \
                                                    const T*, int64_t, double, \
                                                    double, double*, double*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort
