// The boundary between kernels/cuda/prelu.cc (gcc, absl::Status) and
// kernels/cuda/prelu.cu (nvcc): plain C++ types and cudaStream_t only. Each
// Launch* enqueues its kernel on `stream` and returns at once; the caller
// checks LaunchStatus right after. Arguments are checked by prelu.cc. Use
// kernels/cuda/prelu.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_PRELU_LAUNCH_H_
#define COHORT_KERNELS_CUDA_PRELU_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace prelu_internal {

struct PreluArgs {
  int64_t outer, channels, inner;
};
void LaunchPreluForward(const PreluArgs& a, const float* in, const float* slope,
                        float* out, cudaStream_t stream);
void LaunchPreluInputGrad(const PreluArgs& a, const float* in,
                          const float* slope, const float* grad_out,
                          float* grad_in, cudaStream_t stream);
void LaunchPreluSlopeGrad(const PreluArgs& a, const float* in,
                          const float* grad_out, float* grad_slope,
                          cudaStream_t stream);

}  // namespace prelu_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_PRELU_LAUNCH_H_
