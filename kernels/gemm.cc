#include "kernels/gemm.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/logging.h"
#include "dnnl.h"
#include "kernels/gemm_small.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

// Up to this many multiply-adds, float products with alpha = 1 and beta 0
// or 1 use the in-place kernels of gemm_small.h, which beat OpenBLAS on every
// dense-layer shape of the benchmark models (conv_bench); beyond it,
// OpenBLAS's cache blocking and threads win.
constexpr int64_t kSmallGemmMacs = int64_t{1} << 23;

// Whether oneDNN runs AVX-512 code here; elsewhere its sgemm was not
// measured against OpenBLAS, which keeps those machines.
bool OnednnSgemmPays() {
  static const bool pays =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) ==
      dnnl_cpu_isa_avx512_core;
  return pays;
}

// oneDNN's sgemm where it pays; false leaves the product to OpenBLAS.
bool OnednnSgemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!OnednnSgemmPays()) return false;
  ApplyOnednnThreads();
  return dnnl_sgemm(trans_a == Trans::kYes ? 'T' : 'N',
                    trans_b == Trans::kYes ? 'T' : 'N', m, n, k, alpha, a, lda,
                    b, ldb, beta, c, ldc) == dnnl_success;
}

CBLAS_TRANSPOSE ToCblas(Trans t) {
  return t == Trans::kYes ? CblasTrans : CblasNoTrans;
}

// Horizontal sum of one AVX register.
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float SumFloat(const float* a, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(a + j));
    acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(a + j + 8));
  }
  float s = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; j < n; ++j) s += a[j];
  return s;
}

}  // namespace

bool GemmRunsOnCaller(Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                      int64_t k) {
  return m * n * k <= kSmallGemmMacs &&
         !(trans_a == Trans::kYes && trans_b == Trans::kYes);
}

template <typename T>
void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
          T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
          T* c, int64_t ldc) {
  DCHECK(m >= 0 && n >= 0 && k >= 0);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS would scale C by beta; an empty sum is zero.
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
      }
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
        m * n * k <= kSmallGemmMacs &&
        gemm_internal::SmallSgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb,
                                  beta == 1.0f, c, ldc)) {
      return;
    }
    if (OnednnSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                    ldc)) {
      return;
    }
    cblas_sgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

template <typename T>
void RowSums(int64_t m, int64_t n, const T* a, int64_t lda, T* out) {
  for (int64_t i = 0; i < m; ++i) {
    const T* row = a + i * lda;
    if constexpr (std::is_same_v<T, float>) {
      out[i] = SumFloat(row, n);
    } else {
      T s = 0;
      for (int64_t j = 0; j < n; ++j) s += row[j];
      out[i] = s;
    }
  }
}

template <typename T>
void ColumnSums(int64_t m, int64_t n, const T* a, int64_t lda, T* out) {
  std::memset(out, 0, n * sizeof(T));
  for (int64_t i = 0; i < m; ++i) {
    const T* row = a + i * lda;
    for (int64_t j = 0; j < n; ++j) out[j] += row[j];  // vectorized by -O2
  }
}

template <typename T>
void BroadcastRow(int64_t m, int64_t n, const T* row, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, row, n * sizeof(T));
}

template <typename T>
void BroadcastColumn(int64_t m, int64_t n, const T* col, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    std::fill(c + i * ldc, c + i * ldc + n, col[i]);
}

template <typename T>
void PositionwiseLinear(const T* w, const T* bias, const T* x, int64_t o,
                        int64_t i, int64_t m, T* out) {
  if (bias != nullptr) BroadcastColumn<T>(o, m, bias, out, m);
  Gemm<T>(Trans::kNo, Trans::kNo, o, m, i, T(1), w, i, x, m,
          bias != nullptr ? T(1) : T(0), out, m);
}

template <typename T>
void PositionwiseLinearBackward(const T* w, const T* x, const T* dy, int64_t o,
                                int64_t i, int64_t m, T* dw, T* db, T* dx) {
  Gemm<T>(Trans::kNo, Trans::kYes, o, i, m, T(1), dy, m, x, m, T(0), dw, i);
  if (db != nullptr) RowSums<T>(o, m, dy, m, db);
  if (dx != nullptr) {
    Gemm<T>(Trans::kYes, Trans::kNo, i, m, o, T(1), w, i, dy, m, T(0), dx, m);
  }
}

#define COHORT_INSTANTIATE_GEMM(T)                                            \
  template void Gemm<T>(Trans, Trans, int64_t, int64_t, int64_t, T, const T*, \
                        int64_t, const T*, int64_t, T, T*, int64_t);          \
  template void RowSums<T>(int64_t, int64_t, const T*, int64_t, T*);          \
  template void ColumnSums<T>(int64_t, int64_t, const T*, int64_t, T*);       \
  template void BroadcastRow<T>(int64_t, int64_t, const T*, T*, int64_t);     \
  template void BroadcastColumn<T>(int64_t, int64_t, const T*, T*, int64_t);  \
  template void PositionwiseLinear<T>(const T*, const T*, const T*, int64_t,  \
                                      int64_t, int64_t, T*);                  \
  template void PositionwiseLinearBackward<T>(                                \
      const T*, const T*, const T*, int64_t, int64_t, int64_t, T*, T*, T*);

COHORT_INSTANTIATE_GEMM(float)
COHORT_INSTANTIATE_GEMM(double)
#undef COHORT_INSTANTIATE_GEMM

}  // namespace cohort
