// Float GEMM kernels for the small products of dense layers (internal to
// kernels/gemm.cc).
//
// OpenBLAS packs both operands on every call; for a linear layer at a batch
// of 10 the weight matrix is the larger operand, so packing it costs about
// as much as the product (measured: 12.5 us for 10 x 200 x 100, 32 GFLOP/s).
// These kernels read the operands in place:
//  - B not transposed (A either way): rows of C are built from broadcasts of
//    A and vectors of B's rows;
//  - A not transposed, B transposed: dot products along k, 8 lanes at a
//    time, reduced once per tile.
// Row-major, alpha = 1, beta 0 or 1. Thread safety: reentrant.
#ifndef COHORT_KERNELS_GEMM_SMALL_H_
#define COHORT_KERNELS_GEMM_SMALL_H_

#include <cstdint>

#include "kernels/gemm.h"

namespace cohort {
namespace gemm_internal {

// C = op(A) op(B) (+ C when accumulate); returns false, touching nothing,
// when the combination is not handled (both transposed).
bool SmallSgemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
                const float* a, int64_t lda, const float* b, int64_t ldb,
                bool accumulate, float* c, int64_t ldc);

}  // namespace gemm_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_GEMM_SMALL_H_
