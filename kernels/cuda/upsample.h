// CUDA kernels of PyTorch's nn.Upsample(scale_factor=k) for an integer k,
// nearest or bilinear with align_corners=False, over float32 NCHW
// activations: N*C contiguous H x W planes. The bilinear taps are the CPU
// engine's (kernels/upsample.h, whose constexpr BilinearTap the kernels
// share), so results match it up to float rounding. Backward gathers each
// input's gradient from the outputs that read it, in a fixed order (no
// atomics), so results are deterministic.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted. Arguments are
// checked before anything touches the device, so bad arguments fail the
// same way on machines without a GPU. Zero planes launch nothing.
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. Thread safety: stateless; the usual CUDA
// rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_UPSAMPLE_H_
#define COHORT_KERNELS_CUDA_UPSAMPLE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

struct UpsampleShape {
  int64_t planes = 0;  // N * C
  int64_t in_h = 0, in_w = 0;
  int64_t scale = 1;
  bool bilinear = false;  // else nearest
};

// out (planes x in_h*scale x in_w*scale) = the input upsampled.
absl::Status UpsampleForward(const UpsampleShape& s, const float* in,
                             float* out, cudaStream_t stream);

// grad_in = each output gradient summed into the inputs its output read,
// with the weights it read them by; overwritten, not accumulated.
absl::Status UpsampleBackward(const UpsampleShape& s, const float* grad_out,
                              float* grad_in, cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_UPSAMPLE_H_
