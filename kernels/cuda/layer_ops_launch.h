// The boundary between kernels/cuda/layer_ops.cc (gcc, absl::Status) and
// kernels/cuda/layer_ops.cu (nvcc): plain C++ types and cudaStream_t only.
// Each Launch* enqueues its kernels on `stream` and returns at once; the
// caller checks LaunchStatus right after. Arguments are checked by
// layer_ops.cc. Use kernels/cuda/layer_ops.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_LAYER_OPS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_LAYER_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace layer_ops_internal {

// kind: kernels/activations.h's ActivationKind as an int.
void LaunchActivationForward(int kind, float slope, const float* in, float* out,
                             int64_t n, cudaStream_t stream);
void LaunchActivationBackward(int kind, float slope, const float* in,
                              const float* grad_out, float* grad_in, int64_t n,
                              cudaStream_t stream);

struct NormArgs {
  int64_t rows, groups, row_size, inner;
  bool per_element;
};
void LaunchNormForward(const NormArgs& a, float eps, const float* x,
                       const float* weight, const float* bias, float* y,
                       float* mean, float* invstd, cudaStream_t stream);
// weight null: no parameter gradients.
void LaunchNormBackward(const NormArgs& a, const float* x, const float* dy,
                        const float* weight, const float* mean,
                        const float* invstd, float* dx, float* weight_grad,
                        float* bias_grad, cudaStream_t stream);

struct Pool1dArgs {
  int64_t planes, in_l, out_l, kernel, stride, padding;
};
void LaunchMaxPool1dForward(const Pool1dArgs& a, const float* in, float* out,
                            int32_t* argmax, cudaStream_t stream);
void LaunchMaxPool1dBackward(const Pool1dArgs& a, const float* grad_out,
                             const int32_t* argmax, float* grad_in,
                             cudaStream_t stream);
void LaunchAvgPool1dForward(const Pool1dArgs& a, const float* in, float* out,
                            cudaStream_t stream);
void LaunchAvgPool1dBackward(const Pool1dArgs& a, const float* grad_out,
                             float* grad_in, cudaStream_t stream);

}  // namespace layer_ops_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_LAYER_OPS_LAUNCH_H_
