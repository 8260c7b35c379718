// CUDA kernels of the softmax over one axis (PyTorch's nn.Softmax(dim))
// over float32 activations seen as [outer, axis, inner], as the CPU
// kernels (kernels/softmax.h) see them: the GPU engine's NCHW {N, C, ...}
// is [N, C, rest] and dense {N, F} is [N, F, 1]. Numerically stable (the
// maximum along the axis is subtracted before exp); backward recomputes
// the probabilities from the forward input, dx = y * (dy - sum(dy * y)).
// Sums run in a fixed order (no atomics), so results are deterministic.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted. Arguments are
// checked before anything touches the device, so bad arguments fail the
// same way on machines without a GPU. outer = 0 launches nothing.
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. Thread safety: stateless; the usual CUDA
// rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_SOFTMAX_H_
#define COHORT_KERNELS_CUDA_SOFTMAX_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

struct SoftmaxShape {
  int64_t outer = 0, axis = 0, inner = 0;
};

// `out` may equal `in`.
absl::Status SoftmaxForward(const SoftmaxShape& s, const float* in, float* out,
                            cudaStream_t stream);

// grad_in = y * (grad_out - sum_axis(grad_out * y)), y = softmax(in);
// overwritten, not accumulated. `grad_in` may equal `grad_out`.
absl::Status SoftmaxBackward(const SoftmaxShape& s, const float* in,
                             const float* grad_out, float* grad_in,
                             cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_SOFTMAX_H_
