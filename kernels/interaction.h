// DLRM's dot interaction (interact_features with arch_interaction_itself
// off) over a batch of samples, forward and backward.
//
// A sample is 1 + T vectors v_0..v_T of `dim` features, contiguous. Its
// output is v_0 followed by dot(v_i, v_j) for i = 1..T, j = 0..i-1 in that
// order: the strict lower triangle of the Gram matrix V V^T, row by row.
// Backward is dV = (G + G^T) V, with G the strict lower triangle filled from
// the pairs' output gradient, plus v_0's pass-through gradient.
//
// The kernels use AVX2 and FMA (the build's baseline ISA): forward computes
// a row's dot products a vector of them at a time; backward gathers each
// row of dV from G's row and column without forming G. The batch is split
// into ranges on the compute threads (kernels/parallel.h), one sample per
// thread in a fixed order, so results do not depend on the thread count.
// They may differ from a plain loop by rounding only (summation order and
// fused multiply-adds).
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Inputs and outputs must not
// overlap. Instantiated for float and double.
#ifndef COHORT_KERNELS_INTERACTION_H_
#define COHORT_KERNELS_INTERACTION_H_

#include <cstdint>

namespace cohort {

// Features of one sample's dot-interaction output: dim + (T + 1) T / 2.
inline constexpr int64_t DotInteractionOutputs(int64_t vectors, int64_t dim) {
  return dim + vectors * (vectors - 1) / 2;
}

// y[s] = [v_0, dot(v_i, v_j) for i = 1.., j < i] for each of the `n`
// samples x[s] of `vectors` x `dim` values; y has DotInteractionOutputs
// values per sample.
template <typename T>
void DotInteractionForward(const T* x, int64_t n, int64_t vectors, int64_t dim,
                           T* y);

// grad_x[s] = d(loss)/d(x[s]) given grad_y[s] = d(loss)/d(y[s]) and the
// forward input x, for each of the `n` samples. Overwrites grad_x.
template <typename T>
void DotInteractionBackward(const T* x, const T* grad_y, int64_t n,
                            int64_t vectors, int64_t dim, T* grad_x);

}  // namespace cohort

#endif  // COHORT_KERNELS_INTERACTION_H_
