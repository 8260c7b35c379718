// The boundary between kernels/cuda/adaptive_pool.cc (gcc, absl::Status) and
// kernels/cuda/adaptive_pool.cu (nvcc): plain C++ types and cudaStream_t
// only. Each Launch* enqueues its kernel on `stream` and returns at once;
// the caller checks LaunchStatus right after. Arguments are checked by
// adaptive_pool.cc. Use kernels/cuda/adaptive_pool.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_ADAPTIVE_POOL_LAUNCH_H_
#define COHORT_KERNELS_CUDA_ADAPTIVE_POOL_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace adaptive_pool_internal {

struct AdaptivePoolArgs {
  int64_t planes, in_h, in_w, out_h, out_w;
};
void LaunchAdaptiveAvgPool2dForward(const AdaptivePoolArgs& a, const float* in,
                                    float* out, cudaStream_t stream);
void LaunchAdaptiveAvgPool2dBackward(const AdaptivePoolArgs& a,
                                     const float* grad_out, float* grad_in,
                                     cudaStream_t stream);

}  // namespace adaptive_pool_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ADAPTIVE_POOL_LAUNCH_H_
