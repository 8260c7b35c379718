// CUDA kernels of PyTorch's nn.PReLU over float32 activations seen as
// [outer, channels, inner], channel c on slope[c], as the CPU kernels
// (kernels/prelu.h) see them: the GPU engine's NCHW {N, C, ...} is
// [N, C, rest], dense {N, F} is [N, F, 1], and one shared slope is
// [1, 1, everything]. The slope gradients are summed in double, one thread
// block per channel in a fixed order (no atomics), so results are
// deterministic.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted. Arguments are
// checked before anything touches the device, so bad arguments fail the
// same way on machines without a GPU.
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. Thread safety: stateless; the usual CUDA
// rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_PRELU_H_
#define COHORT_KERNELS_CUDA_PRELU_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

struct PreluShape {
  int64_t outer = 0, channels = 0, inner = 0;
};

// out = in > 0 ? in : slope[c] * in. `out` may equal `in`.
absl::Status PreluForward(const PreluShape& s, const float* in,
                          const float* slope, float* out, cudaStream_t stream);

// grad_slope[c] = the sum over channel c of (in > 0 ? 0 : in * grad_out),
// overwritten; grad_in (skipped when null) = in > 0 ? grad_out :
// slope[c] * grad_out. x = 0 takes the negative side, as PyTorch's.
absl::Status PreluBackward(const PreluShape& s, const float* in,
                           const float* slope, const float* grad_out,
                           float* grad_in, float* grad_slope,
                           cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_PRELU_H_
