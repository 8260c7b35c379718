// The boundary between kernels/cuda/upsample.cc (gcc, absl::Status) and
// kernels/cuda/upsample.cu (nvcc): plain C++ types and cudaStream_t only.
// Each Launch* enqueues its kernel on `stream` and returns at once; the
// caller checks LaunchStatus right after. Arguments are checked by
// upsample.cc. Use kernels/cuda/upsample.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_UPSAMPLE_LAUNCH_H_
#define COHORT_KERNELS_CUDA_UPSAMPLE_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace upsample_internal {

struct UpsampleArgs {
  int64_t planes, in_h, in_w, scale;
  bool bilinear;
};
void LaunchUpsampleForward(const UpsampleArgs& a, const float* in, float* out,
                           cudaStream_t stream);
void LaunchUpsampleBackward(const UpsampleArgs& a, const float* grad_out,
                            float* grad_in, cudaStream_t stream);

}  // namespace upsample_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_UPSAMPLE_LAUNCH_H_
