// Orthonormal columns for PowerSGD's low-rank factors.
//
// Stateless and reentrant; the caller owns the matrix.
#ifndef COHORT_KERNELS_LOW_RANK_H_
#define COHORT_KERNELS_LOW_RANK_H_

#include <cstdint>

namespace cohort {

// Gram-Schmidt over the `cols` columns of the row-major rows x cols matrix
// `m`, in place, column by column: each column is divided by its norm (plus
// `epsilon`), then its projection is taken out of every later column (the
// modified form, as PyTorch's _orthogonalize_gram_schmidt). A column whose
// norm is 0 (a layer with no gradient) becomes zeros rather than NaN. The
// result depends only on the input bits, so every rank that orthogonalizes
// the same all-reduced factor gets the same bits.
void OrthogonalizeColumns(float* m, int64_t rows, int cols, float epsilon);

}  // namespace cohort

#endif  // COHORT_KERNELS_LOW_RANK_H_
