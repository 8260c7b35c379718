// General matrix multiply on row-major host matrices, for float and double.
//
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C[m, n]
//
// Engine code is written once for both scalar types and never spells out CBLAS
// enums. Small float products (alpha 1, beta 0 or 1: where oneDNN runs AVX-512
// code, under 2^18 multiply-adds on Intel's cores and under 2^22 on others; up
// to 2^23 elsewhere) run on AVX2 kernels that read the operands in place
// (gemm_small.h). Larger float products go to oneDNN's sgemm where oneDNN runs
// AVX-512 code: on this project's AVX-512 machines it ran the transformer and
// convolution shapes at 1.2-2.6x OpenBLAS 0.3.21's speed, products from 2^22 to
// 2^23 (convolutions on 1x1 maps) at 2-7x the in-place kernels', and on Intel's
// cores products from 2^19 up at 1.7-5.6x, and attention's strided 2^18 ones
// too (conv_bench, gemm.cc). Everything else goes to OpenBLAS (cblas_sgemm /
// cblas_dgemm). Both run single-threaded: OpenBLAS's own pthread pool spins
// against the OpenMP team that the other kernels run on (the OpenMP build of
// OpenBLAS shares the team, but with it two replicas calling at once no longer
// trained reproducibly), and oneDNN's threads split some products' sums by the
// thread count. Instead, every product splits into parts over the caller's
// OpenMP team (kernels/parallel.h): ranges of C's rows or columns, or of the
// sum where C is small and the sum long, fixed by the shape, so that results do
// not depend on the thread count. The callee owns nothing; all matrices belong
// to the caller.
//
// Thread safety: reentrant; concurrent calls on disjoint outputs are fine.
#ifndef COHORT_KERNELS_GEMM_H_
#define COHORT_KERNELS_GEMM_H_

#include <algorithm>
#include <cstdint>

namespace cohort {

enum class Trans { kNo, kYes };

// `lda`, `ldb`, `ldc` are the row strides (in elements) of A, B and C as
// stored, i.e. before op() is applied. When beta == 0, C is not read.
template <typename T>
void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
          T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
          T* c, int64_t ldc);

// Whether Gemm<float> with these operands, alpha 1 and beta 0 or 1 runs on
// the calling thread alone (the small-product kernels), so that a caller
// may run several such products at once on threads of its own.
bool GemmRunsOnCaller(Trans trans_a, Trans trans_b, int64_t m, int64_t n,
                      int64_t k);

// Columns per panel of a panel-packed B operand (PanelSgemm). Panel p holds
// columns [24 p, 24 p + w) (w = min(24, n - 24 p)) as k rows of w floats,
// and the panels follow one another. A panel is read front to back, so it
// streams through the cache; B read in place with a row stride of a few KiB
// maps its rows to a handful of cache sets and is fetched again for every
// four rows of A.
inline constexpr int64_t kPanelColumns = 24;

// Where B(row, col) of a k x n operand lies in the panel layout.
inline int64_t PanelOffset(int64_t n, int64_t k, int64_t row, int64_t col) {
  const int64_t start = col / kPanelColumns * kPanelColumns;
  return start * k + row * std::min(kPanelColumns, n - start) + col - start;
}

// C[m, n] = op(A)[m, k] B[k, n] (+ C when `accumulate`), B in panels, on the
// calling thread alone (float, AVX2). Each element of C sums over k in
// order, as Gemm's small-product kernels do, so a product gives the same
// bits as Gemm<float> with alpha 1 on B in place, whenever Gemm takes those
// kernels.
void PanelSgemm(Trans trans_a, int64_t m, int64_t n, int64_t k, const float* a,
                int64_t lda, const float* b_panels, bool accumulate, float* c,
                int64_t ldc);

// Row sums: out[i] = sum_j a[i * lda + j] for j < n (bias gradients of
// channel-major activations). Overwrites `out`.
template <typename T>
void RowSums(int64_t m, int64_t n, const T* a, int64_t lda, T* out);

// Column sums: out[j] = sum_i a[i * lda + j] for i < m (bias gradients of
// dense {N, F} activations). Overwrites `out`.
template <typename T>
void ColumnSums(int64_t m, int64_t n, const T* a, int64_t lda, T* out);

// Copies `row` (length n) into each of the m rows of c (stride ldc), so that
// a following Gemm with beta = 1 adds a bias in the same pass.
template <typename T>
void BroadcastRow(int64_t m, int64_t n, const T* row, T* c, int64_t ldc);

// Fills row i of c (m rows of n, stride ldc) with col[i]: the per-channel
// bias of channel-major activations, added the same way.
template <typename T>
void BroadcastColumn(int64_t m, int64_t n, const T* col, T* c, int64_t ldc);

// A Linear applied to each of the m columns of x, as the batch-inner layout
// stores positions: out {o, m} = W {o, i} x {i, m}, plus bias {o} in every
// column when `bias` is not null.
template <typename T>
void PositionwiseLinear(const T* w, const T* bias, const T* x, int64_t o,
                        int64_t i, int64_t m, T* out);

// Its backward: dW {o, i} = dy x^T; db {o} = the row sums of dy (when `db`
// is not null); dx {i, m} = W^T dy (when `dx` is not null).
template <typename T>
void PositionwiseLinearBackward(const T* w, const T* x, const T* dy, int64_t o,
                                int64_t i, int64_t m, T* dw, T* db, T* dx);

}  // namespace cohort

#endif  // COHORT_KERNELS_GEMM_H_
