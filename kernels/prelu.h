// CPU kernels of PyTorch's nn.PReLU: y = x > 0 ? x : a[c] * x with one
// learned slope per channel, forward and backward.
//
// A tensor is seen as [outer, channels, inner] in row-major order, channel
// c using slope[c]; a slope shared by all is channels = 1. The CPU engine's
// dense {N, F} is [N, F, 1] (the loops then run across the features, with
// the slopes as a vector); its batch-inner {C, N, ...} is [1, C, N * rest].
//
// PyTorch's subgradient at 0: x = 0 takes the negative side (dx = a * dy,
// da += x * dy = 0).
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. `out` may equal `in`.
// Instantiated for float and double.
#ifndef COHORT_KERNELS_PRELU_H_
#define COHORT_KERNELS_PRELU_H_

#include <cstdint>

namespace cohort {

// Callers validate it: channels and inner at least 1.
struct PreluGeometry {
  int64_t outer = 0, channels = 0, inner = 0;
};

template <typename T>
void PreluForward(const PreluGeometry& g, const T* in, const T* slope, T* out);

// grad_slope[c] = the sum over channel c of (x > 0 ? 0 : x * dy),
// overwritten; grad_in (skipped when null) = x > 0 ? dy : slope * dy.
template <typename T>
void PreluBackward(const PreluGeometry& g, const T* in, const T* slope,
                   const T* grad_out, T* grad_in, T* grad_slope);

}  // namespace cohort

#endif  // COHORT_KERNELS_PRELU_H_
