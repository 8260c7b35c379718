// The boundary between kernels/cuda/branch_ops.cc (gcc, absl::Status) and
// kernels/cuda/branch_ops.cu (nvcc): plain C++ types and cudaStream_t only.
// Each Launch* enqueues its kernel on `stream` and returns at once; the
// caller checks LaunchStatus right after. Arguments are checked by
// branch_ops.cc. Use kernels/cuda/branch_ops.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_BRANCH_OPS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_BRANCH_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace branch_ops_internal {

void LaunchMultiplyInPlace(const float* x, float* y, int64_t n,
                           cudaStream_t stream);
void LaunchScalePlanes(const float* scale, float* y, int64_t planes,
                       int64_t plane, cudaStream_t stream);
void LaunchSumPlanes(const float* x, float* out, int64_t planes, int64_t plane,
                     cudaStream_t stream);

}  // namespace branch_ops_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_BRANCH_OPS_LAUNCH_H_
