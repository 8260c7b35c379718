// The narrow interface between the nvcc-compiled clipping kernels (grad_ops.cu)
// and their host wrappers (grad_ops.cc): plain C++ types only, so that nvcc
// never sees absl. Use kernels/cuda/grad_ops.h instead.
//
// Each Launch* function enqueues one kernel on `stream` and returns at once;
// the caller checks the launch with LaunchStatus.
#ifndef COHORT_KERNELS_CUDA_GRAD_OPS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_GRAD_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace cuda_internal {

void LaunchClamp(float* g, int64_t n, float limit, cudaStream_t stream);
void LaunchClipToNorm(float* g, int64_t n, const float* sum_squares,
                      double max_norm, cudaStream_t stream);
void LaunchAccumulate(const float* g, int64_t n, float weight, bool first,
                      float* acc, cudaStream_t stream);
void LaunchFinishAccumulated(const float* acc, int64_t n, float weight,
                             float scale, float* g, cudaStream_t stream);

}  // namespace cuda_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_GRAD_OPS_LAUNCH_H_
