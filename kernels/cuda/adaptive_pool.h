// CUDA kernels of 2-D adaptive average pooling (PyTorch's
// nn.AdaptiveAvgPool2d) over float32 NCHW activations: N*C contiguous
// H x W planes. The windows are the CPU engine's (kernels/adaptive_pool.h,
// whose bounds the kernels share), so results match it up to float
// rounding. Backward gathers each input's gradient from the outputs that
// cover it, in a fixed order (no atomics), so results are deterministic.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted. Arguments are
// checked before anything touches the device, so bad arguments fail the
// same way on machines without a GPU. Zero planes launch nothing.
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. Thread safety: stateless; the usual CUDA
// rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_ADAPTIVE_POOL_H_
#define COHORT_KERNELS_CUDA_ADAPTIVE_POOL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

struct AdaptivePool2dShape {
  int64_t planes = 0;  // N * C
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;
};

// out[p, i, j] = the mean of in[p] over cell (i, j)'s window.
absl::Status AdaptiveAvgPool2dForward(const AdaptivePool2dShape& s,
                                      const float* in, float* out,
                                      cudaStream_t stream);

// grad_in = each grad_out cell spread evenly over its window, summed where
// windows overlap; overwritten, not accumulated.
absl::Status AdaptiveAvgPool2dBackward(const AdaptivePool2dShape& s,
                                       const float* grad_out, float* grad_in,
                                       cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ADAPTIVE_POOL_H_
