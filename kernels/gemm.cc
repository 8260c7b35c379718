#include "kernels/gemm.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "common/logging.h"
#include "dnnl.h"
#include "kernels/elementwise.h"
#include "kernels/gemm_small.h"
#include "kernels/onednn_threads.h"
#include "kernels/parallel.h"

namespace cohort {
namespace {

// Up to this many multiply-adds, float products with alpha = 1 and beta 0
// or 1 use the in-place kernels of gemm_small.h, which beat OpenBLAS on every
// dense-layer shape of the benchmark models (conv_bench); beyond it,
// OpenBLAS's cache blocking wins.
constexpr int64_t kSmallGemmMacs = int64_t{1} << 23;

// The same where oneDNN's sgemm runs. Alone, with its operands in cache, it
// took 1.3-7x less time than the small kernels on one thread from 10^5
// multiply-adds up. In training, products under 2^22 (the dense layers of
// LeNet-5 on MNIST) kept the small kernels' speed or lost a few percent on
// oneDNN; from 2^22 up oneDNN won there too: the weight gradient of a
// 512-channel 3x3 convolution on 1x1 maps at batch 32 (512 x 512 x 32, B
// transposed, 2^23) took 0.09 against 0.42 ms, and such layers of
// ResNet-18 at 32x32 went from 2.15 to 1.67 ms a step. These are an AMD
// EPYC's numbers: its cores run a 512-bit operation as two 256-bit halves,
// so the AVX2 kernels keep up with oneDNN's AVX-512 code there.
constexpr int64_t kSmallGemmMacsBesideOnednn = (int64_t{1} << 22) - 1;

// The same on Intel's AVX-512 cores, which run 512-bit vectors at full
// width: oneDNN's sgemm took 1.7-5.6x less time than the small kernels from
// 2^19 multiply-adds up (attention's 64 x 196 x 64 products, LeNet-5's dense
// layers), while below 2^16 its call costs more than the product; between,
// the two were even on contiguous operands in cache (docs/BENCHMARKS.md,
// "Another machine"). Attention's 64 x 64 x 64 products (2^18) read rows of
// Q, K and V a whole batch apart, which the small kernels take in place and
// oneDNN packs: with them on oneDNN the attention core of gpt_tiny's shape
// took 0.91-0.92x the time at one thread and 0.94x at two.
constexpr int64_t kSmallGemmMacsBesideFullWidthOnednn = (int64_t{1} << 18) - 1;

// Whether oneDNN runs AVX-512 code here; elsewhere its sgemm was not
// measured against OpenBLAS, which keeps those machines.
bool OnednnSgemmPays() {
  static const bool pays =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) ==
      dnnl_cpu_isa_avx512_core;
  return pays;
}

// The most multiply-adds of a float product the small kernels take here.
int64_t SmallGemmMostMacs() {
  static const int64_t most = !OnednnSgemmPays() ? kSmallGemmMacs
                              : __builtin_cpu_is("intel")
                                  ? kSmallGemmMacsBesideFullWidthOnednn
                                  : kSmallGemmMacsBesideOnednn;
  return most;
}

// oneDNN's sgemm on the calling thread alone. Its own threads would split
// some products' sums by the thread count (a 512 x 256 x 1024 product with
// B transposed changed 110,305 of its 131,072 results between one thread and
// two), and they split a product evenly, where GemmInParts hands its parts
// to whichever thread is free. Inside a parallel region oneDNN runs on the
// caller anyway.
void SerialOnednnSgemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const float* a, int64_t lda,
                       const float* b, int64_t ldb, float beta, float* c,
                       int64_t ldc) {
  const int saved = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
  const dnnl_status_t status = dnnl_sgemm(
      trans_a == Trans::kYes ? 'T' : 'N', trans_b == Trans::kYes ? 'T' : 'N', m,
      n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (saved != 1) omp_set_num_threads(saved);
  CHECK(status == dnnl_success) << "oneDNN sgemm failed: " << status;
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
         (beta == T(0) || beta == T(1)) && m * n * k <= SmallGemmMostMacs() &&
         !(trans_a == Trans::kYes && trans_b == Trans::kYes);
}

// One product on the calling thread: the small-product kernels where
// `small`, else oneDNN's sgemm where it pays and OpenBLAS elsewhere.
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
    if (OnednnSgemmPays()) {
      SerialOnednnSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                        c, ldc);
      return;
    }
    cblas_sgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ToCblas(trans_a), ToCblas(trans_b), m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// How a product splits over the compute team: into `parts` products over
// disjoint ranges of C's rows or columns, or over ranges of the sum's k whose
// results then add up in order. The split depends on the shape alone, never
// on the thread count: OpenBLAS rounds differently when the same columns
// come in a call of another width (measured: a 64 x 1000 x 300 product split
// at column 496 changed 3091 of its 64000 results, and OpenBLAS's own two
// threads changed 13092), and so does oneDNN for some shapes (13 of 300
// random products gave other bits cut than whole), so a split that followed
// the thread count would change results with it.
//
// One part per kMacsPerPart multiply-adds, at most kMaxParts, rounded down
// to a power of two so that two, four or eight threads share them evenly
// (three parts on two threads leave one thread idle a third of the time).
// OpenBLAS and oneDNN pack the operand that every part shares once per part,
// so parts of C are at least kMinBlasPartExtent wide: gpt_tiny's products
// over 2048 positions took 8-17% longer on one thread in 8 parts of 256
// than in one call, 1-8% longer in 2 parts, and training it on one thread
// lost 8% with parts of 256 and nothing measurable with parts of 512. Products
// with a small C and a long sum (the weight gradients of position-wise layers:
// channels x channels over every position of the batch) cut the sum instead,
// which repacks nothing: a 256 x 256 weight gradient over 2048 positions had
// one part by C's extent and ran on one thread. The small kernels pack nothing,
// and on one thread take the product whole.
constexpr int64_t kMacsPerPart = int64_t{1} << 20;
constexpr int64_t kMaxParts = 8;
constexpr int64_t kMinSmallPartExtent = 4 * kRangeAlign;
constexpr int64_t kMinBlasPartExtent = 32 * kRangeAlign;
constexpr int64_t kMinSumPartDepth = 32 * kRangeAlign;

enum class Cut { kRows, kColumns, kSum };
struct Split {
  Cut cut;
  int64_t parts;
};

int64_t PowerOfTwoFloor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

Split SplitOf(bool small, int64_t m, int64_t n, int64_t k) {
  const int64_t min_extent = small ? kMinSmallPartExtent : kMinBlasPartExtent;
  const int64_t by_work = std::min(kMaxParts, m * n * k / kMacsPerPart);
  const int64_t by_output = std::min(by_work, std::max(m, n) / min_extent);
  const int64_t by_sum =
      small || by_output > 1 ? 0 : std::min(by_work, k / kMinSumPartDepth);
  if (by_sum > 1) return {Cut::kSum, PowerOfTwoFloor(by_sum)};
  return {n >= m ? Cut::kColumns : Cut::kRows,
          PowerOfTwoFloor(std::max<int64_t>(1, by_output))};
}

// Where part p of `parts` over [0, extent) begins: on a multiple of
// kRangeAlign, where the kernels' vector blocks line up.
int64_t PartBoundary(int64_t p, int64_t parts, int64_t extent) {
  return p == parts ? extent : extent * p / parts / kRangeAlign * kRangeAlign;
}

// The threads `parts` parts run on: one inside a parallel region, where the
// caller already shares the work out.
int64_t ThreadsForParts(int64_t parts) {
  if (parts <= 1 || omp_in_parallel()) return 1;
  ApplyOnednnThreads();
  return std::min<int64_t>(parts, omp_get_max_threads());
}

// Runs `part(p)` for p in [0, parts), shared out over the caller's team.
// Parts go to whichever thread is free: a part's result does not depend on
// the thread that runs it, and on a virtual machine one core can run slower
// than the other for seconds at a time (the same products took 243 ms on
// one of this project's two cores and 289 ms on the other).
template <typename Part>
void RunParts(int64_t parts, const Part& part) {
  const int64_t threads = ThreadsForParts(parts);
  if (threads == 1) {
    for (int64_t p = 0; p < parts; ++p) part(p);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int64_t p = 0; p < parts; ++p) part(p);
}

// Rows per range of the row-wise loops: about kElementwiseGrain elements.
int64_t RowGrain(int64_t n) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
}

// Each part's sum over its range of k: the first into C with beta, the
// others into scratch, added into C afterwards in part order, so every
// element sums its parts in one order whatever the thread count. SplitOf
// cuts the sum only where C is under 2 * kMinBlasPartExtent on each side,
// so the scratch a thread keeps stays under 32 MB in float.
template <typename T>
void GemmOverSum(int64_t parts, Trans trans_a, Trans trans_b, int64_t m,
                 int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                 const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  thread_local std::vector<T> scratch;
  const int64_t size = m * n;
  if (scratch.size() < static_cast<size_t>(size * (parts - 1))) {
    scratch.resize(size * (parts - 1));
  }
  T* partials = scratch.data();
  RunParts(parts, [&](int64_t p) {
    const int64_t begin = PartBoundary(p, parts, k);
    const int64_t depth = PartBoundary(p + 1, parts, k) - begin;
    const T* ap = trans_a == Trans::kNo ? a + begin : a + begin * lda;
    const T* bp = trans_b == Trans::kNo ? b + begin * ldb : b + begin;
    T* out = p == 0 ? c : partials + (p - 1) * size;
    GemmOnCaller<T>(false, trans_a, trans_b, m, n, depth, alpha, ap, lda, bp,
                    ldb, p == 0 ? beta : T(0), out, p == 0 ? ldc : n);
  });
  ParallelRanges(m, RowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t p = 1; p < parts; ++p) {
      for (int64_t i = begin; i < end; ++i) {
        AddInPlace(partials + (p - 1) * size + i * n, c + i * ldc, n);
      }
    }
  });
}

// Runs the product in the parts SplitOf gives.
template <typename T>
void GemmInParts(bool small, Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                 int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T beta, T* c, int64_t ldc) {
  const Split split = SplitOf(small, m, n, k);
  const int64_t parts = split.parts;
  if (split.cut == Cut::kSum) {
    GemmOverSum<T>(parts, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                   beta, c, ldc);
    return;
  }
  if (small && ThreadsForParts(parts) == 1) {
    // Each of C's elements comes out of the small kernels the same way
    // wherever the product is cut, so one thread does without the cuts.
    GemmOnCaller<T>(small, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                    beta, c, ldc);
    return;
  }
  const bool by_columns = split.cut == Cut::kColumns;
  const int64_t extent = by_columns ? n : m;
  RunParts(parts, [&](int64_t p) {
    const int64_t begin = PartBoundary(p, parts, extent);
    const int64_t size = PartBoundary(p + 1, parts, extent) - begin;
    if (by_columns) {
      const T* bp = trans_b == Trans::kNo ? b + begin : b + begin * ldb;
      GemmOnCaller<T>(small, trans_a, trans_b, m, size, k, alpha, a, lda, bp,
                      ldb, beta, c + begin, ldc);
    } else {
      const T* ap = trans_a == Trans::kNo ? a + begin * lda : a + begin;
      GemmOnCaller<T>(small, trans_a, trans_b, size, n, k, alpha, ap, lda, b,
                      ldb, beta, c + begin * ldc, ldc);
    }
  });
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
  KeepOpenBlasOnCaller();
  GemmInParts<T>(small, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                 c, ldc);
}

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
