// The boundary between kernels/cuda/softmax.cc (gcc, absl::Status) and
// kernels/cuda/softmax.cu (nvcc): plain C++ types and cudaStream_t only.
// Each Launch* enqueues its kernel on `stream` and returns at once; the
// caller checks LaunchStatus right after. Arguments are checked by
// softmax.cc. Use kernels/cuda/softmax.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_SOFTMAX_LAUNCH_H_
#define COHORT_KERNELS_CUDA_SOFTMAX_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace softmax_internal {

struct SoftmaxArgs {
  int64_t outer, axis, inner;
};
void LaunchSoftmaxForward(const SoftmaxArgs& a, const float* in, float* out,
                          cudaStream_t stream);
void LaunchSoftmaxBackward(const SoftmaxArgs& a, const float* in,
                           const float* grad_out, float* grad_in,
                           cudaStream_t stream);

}  // namespace softmax_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_SOFTMAX_LAUNCH_H_
