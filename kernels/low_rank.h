// The products of PowerSGD's low-rank step: a gradient matrix M (rows x
// cols, row-major) against thin factors P (rows x rank) and Q (cols x
// rank). The factors are held transposed, P^T as rank x rows and Q^T as
// rank x cols, so that each factor column is contiguous: the products run
// along M's rows eight lanes at a time, and Gram-Schmidt walks contiguous
// memory. These shapes (rank 1-8 against rows of hundreds to thousands)
// are what a general GEMM handles worst.
//
// Stateless and reentrant; callers own every buffer. Results depend only
// on the input bits and the shapes, never on the machine, so every rank
// that runs them on the same all-reduced factors gets the same bits.
#ifndef COHORT_KERNELS_LOW_RANK_H_
#define COHORT_KERNELS_LOW_RANK_H_

#include <cstdint>

namespace cohort {

// Gram-Schmidt over the `count` rows (each `length` long) of the row-major
// `m`, in place, row by row: each row is divided by its norm (plus
// `epsilon`), then its projection is taken out of every later row (the
// modified form, as PyTorch's _orthogonalize_gram_schmidt applies it to a
// factor's columns). Norms and projections are summed in double. A row
// whose norm is 0 (a layer with no gradient) becomes zeros rather than NaN.
void OrthogonalizeRows(float* m, int count, int64_t length, float epsilon);

// P^T = (M Q)^T: pt[k][r] = sum_c m[r][c] * qt[k][c].
void LowRankProject(const float* m, int64_t rows, int64_t cols, const float* qt,
                    int rank, float* pt);

// Q^T = (M^T P)^T: qt[k][c] = sum_r pt[k][r] * m[r][c], summed over r in
// order.
void LowRankProjectBack(const float* m, int64_t rows, int64_t cols,
                        const float* pt, int rank, float* qt);

// The approximation and what it leaves out, in one pass:
// out = scale * P Q^T, and error = input - share * out, element by element
// (all rows x cols). `out` may not alias `input` or `error`.
struct LowRankExpansion {
  float scale = 1;
  float share = 1;
  const float* input = nullptr;
  float* out = nullptr;
  float* error = nullptr;
};
void LowRankExpand(const float* pt, const float* qt, int64_t rows, int64_t cols,
                   int rank, const LowRankExpansion& x);

}  // namespace cohort

#endif  // COHORT_KERNELS_LOW_RANK_H_
