// CUDA kernels of the branch block's product (BranchSpec MUL) over float32
// NCHW activations: elementwise products, a per-channel gate [N, C, 1, 1]
// scaling the planes of [N, C, H, W], and the per-plane sums that give the
// gate's gradient. Sums are taken in double in a fixed order (no atomics),
// so results are deterministic.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted. A count of
// zero launches nothing.
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. Thread safety: stateless; the usual CUDA
// rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_BRANCH_OPS_H_
#define COHORT_KERNELS_CUDA_BRANCH_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

// y[i] *= x[i] for `n` floats.
absl::Status MultiplyInPlace(const float* x, float* y, int64_t n,
                             cudaStream_t stream);

// y[i * plane + j] *= scale[i] for `planes` contiguous planes of `plane`
// floats.
absl::Status ScalePlanes(const float* scale, float* y, int64_t planes,
                         int64_t plane, cudaStream_t stream);

// out[i] = the sum of plane i of x, for `planes` contiguous planes of
// `plane` floats.
absl::Status SumPlanes(const float* x, float* out, int64_t planes,
                       int64_t plane, cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_BRANCH_OPS_H_
