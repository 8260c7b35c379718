// CPU kernels of the softmax over one axis (PyTorch's nn.Softmax(dim)),
// forward and backward, numerically stable: the maximum along the axis is
// subtracted before exp.
//
// A tensor is seen as [outer, axis, inner] in row-major order, the softmax
// taken along `axis` for each (outer, inner) pair. The CPU engine's dense
// {N, F} is [N, F, 1]; its batch-inner {C, N, ...} is [1, C, N * rest], so
// that the loops run over the contiguous inner positions and vectorise.
//
// Backward takes the forward *input* and recomputes the probabilities, so a
// layer keeps no copy of its output: dx = y * (dy - sum_axis(dy * y)).
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. `out` may equal `in`;
// `grad_in` must not overlap `grad_out` or `in` (it holds exp(in - max)
// on the way). Instantiated for float and double.
#ifndef COHORT_KERNELS_SOFTMAX_H_
#define COHORT_KERNELS_SOFTMAX_H_

#include <cstdint>

namespace cohort {

// Callers validate it: every size at least 1 (outer may be 0).
struct SoftmaxGeometry {
  int64_t outer = 0, axis = 0, inner = 0;
};

template <typename T>
void SoftmaxForward(const SoftmaxGeometry& g, const T* in, T* out);

// grad_in = y * (grad_out - sum_axis(grad_out * y)), y = softmax(in);
// overwritten, not accumulated.
template <typename T>
void SoftmaxBackward(const SoftmaxGeometry& g, const T* in, const T* grad_out,
                     T* grad_in);

}  // namespace cohort

#endif  // COHORT_KERNELS_SOFTMAX_H_
