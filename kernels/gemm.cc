#include "kernels/gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "common/logging.h"
#include "dnnl.h"
#include "kernels/gemm_small.h"
#include "kernels/onednn_threads.h"
#include "kernels/parallel.h"

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

// Whether the small-product kernels take this float product. Decided once
// for the whole product, before it is split, so that every part runs the
// same kernel whatever the thread count.
template <typename T>
bool SmallKernelsTake(Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                      int64_t k, T alpha, T beta) {
  return std::is_same_v<T, float> && alpha == T(1) &&
         (beta == T(0) || beta == T(1)) && m * n * k <= kSmallGemmMacs &&
         !(trans_a == Trans::kYes && trans_b == Trans::kYes);
}

// One product on the calling thread: the small-product kernels where
// `small`, single-threaded OpenBLAS otherwise.
template <typename T>
void GemmOnCaller(bool small, Trans trans_a, Trans trans_b, int64_t m,
                  int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                  const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (small) {
      gemm_internal::SmallSgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb,
                                beta == 1.0f, c, ldc);
      return;
    }
    cblas_sgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// The parts a product splits into: one per kMacsPerPart multiply-adds, at
// most kMaxParts, each at least a minimum number of rows or columns wide.
// The count depends on the shape alone, never on the thread count: OpenBLAS
// rounds differently when the same columns come in a call of another width
// (measured: a 64 x 1000 x 300 product split at column 496 changed 3091 of
// its 64000 results, and OpenBLAS's own two threads changed 13092), so a
// split that followed the thread count would change results with it.
//
// OpenBLAS packs the operand that every part shares once per part. Packing
// an element costs about what 10-16 multiply-adds do, so parts at least
// kMinBlasPartExtent wide keep the repeats to a few percent of a product's
// work by that count (too little to resolve on this project's 2-core
// machines, where one-thread A/B runs came out even). The small kernels
// pack nothing, and on one thread take the product whole.
constexpr int64_t kMacsPerPart = int64_t{1} << 20;
constexpr int64_t kMaxParts = 8;
constexpr int64_t kMinSmallPartExtent = 4 * kRangeAlign;
constexpr int64_t kMinBlasPartExtent = 16 * kRangeAlign;

int64_t GemmParts(bool small, int64_t m, int64_t n, int64_t k) {
  const int64_t min_extent = small ? kMinSmallPartExtent : kMinBlasPartExtent;
  return std::max<int64_t>(
      1, std::min<int64_t>({kMaxParts, m * n * k / kMacsPerPart,
                            std::max(m, n) / min_extent}));
}

// Runs the product as GemmParts products over disjoint ranges of C's rows
// or (where C is at least as wide as tall) columns, shared out over the
// caller's team (run in turn inside a parallel region, where the caller
// already shares the work out). Range boundaries fall on multiples of
// kRangeAlign, where the kernels' vector blocks line up.
template <typename T>
void GemmInParts(bool small, Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                 int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t parts = GemmParts(small, m, n, k);
  const bool by_columns = n >= m;
  const int64_t extent = by_columns ? n : m;
  const auto boundary = [&](int64_t p) {
    return p == parts ? extent : extent * p / parts / kRangeAlign * kRangeAlign;
  };
  const auto part = [&](int64_t p) {
    const int64_t begin = boundary(p), size = boundary(p + 1) - begin;
    if (by_columns) {
      const T* bp = trans_b == Trans::kNo ? b + begin : b + begin * ldb;
      GemmOnCaller<T>(small, trans_a, trans_b, m, size, k, alpha, a, lda, bp,
                      ldb, beta, c + begin, ldc);
    } else {
      const T* ap = trans_a == Trans::kNo ? a + begin * lda : a + begin;
      GemmOnCaller<T>(small, trans_a, trans_b, size, n, k, alpha, ap, lda, b,
                      ldb, beta, c + begin * ldc, ldc);
    }
  };
  int64_t threads = 1;
  if (parts > 1 && !omp_in_parallel()) {
    ApplyOnednnThreads();
    threads = std::min<int64_t>(parts, omp_get_max_threads());
  }
  if (threads == 1 && small) {
    // Each of C's elements comes out of the small kernels the same way
    // wherever the product is cut, so one thread does without the cuts.
    GemmOnCaller<T>(small, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                    beta, c, ldc);
    return;
  }
  if (threads == 1) {
    for (int64_t p = 0; p < parts; ++p) part(p);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t p = 0; p < parts; ++p) part(p);
}

// OpenBLAS's own pthread pool would spin against the OpenMP team that every
// other kernel runs on (on two cores it cost MobileNetV2 a third of its
// two-thread speed), so OpenBLAS runs single-threaded and products split
// over the team instead.
void KeepOpenBlasOnCaller() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace

bool GemmRunsOnCaller(Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                      int64_t k) {
  return SmallKernelsTake<float>(trans_a, trans_b, m, n, k, 1.0f, 0.0f);
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
  const bool small =
      SmallKernelsTake<T>(trans_a, trans_b, m, n, k, alpha, beta);
  if constexpr (std::is_same_v<T, float>) {
    if (!small && OnednnSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                              beta, c, ldc)) {
      return;
    }
  }
  KeepOpenBlasOnCaller();
  GemmInParts<T>(small, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                 c, ldc);
}

namespace {

// Rows per range of the row-wise loops below: about kElementwiseGrain
// elements.
int64_t RowGrain(int64_t n) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
}

}  // namespace

template <typename T>
void RowSums(int64_t m, int64_t n, const T* a, int64_t lda, T* out) {
  // Each row's sum is one thread's, so the split changes no result.
  ParallelRanges(m, RowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* row = a + i * lda;
      if constexpr (std::is_same_v<T, float>) {
        out[i] = SumFloat(row, n);
      } else {
        T s = 0;
        for (int64_t j = 0; j < n; ++j) s += row[j];
        out[i] = s;
      }
    }
  });
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
  ParallelRanges(m, RowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::fill(c + i * ldc, c + i * ldc + n, col[i]);
    }
  });
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
