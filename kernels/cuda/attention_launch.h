// The boundary between kernels/cuda/attention.cc (gcc, absl::Status) and
// kernels/cuda/attention.cu (nvcc): plain C++ types and cudaStream_t only.
// Each Launch* enqueues its kernels on `stream` and returns at once; the
// caller checks LaunchStatus right after. Arguments are checked by
// attention.cc. Use kernels/cuda/attention.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_ATTENTION_LAUNCH_H_
#define COHORT_KERNELS_CUDA_ATTENTION_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace gpu {
namespace attention_internal {

struct AttentionArgs {
  int64_t n, l, heads, head_dim;
  bool causal;
  int64_t qkv_fs, qkv_ss, out_fs, out_ss;
  float scale;
};

// Sets the kernels' dynamic shared memory limits; returns the first CUDA
// error (cudaSuccess when none).
cudaError_t PrepareAttentionKernels();

void LaunchAttentionForward(const AttentionArgs& a, const float* qkv,
                            float* out, float* lse, cudaStream_t stream);
void LaunchAttentionBackward(const AttentionArgs& a, const float* qkv,
                             const float* out, const float* grad_out,
                             const float* lse, float* delta, float* grad_qkv,
                             cudaStream_t stream);

}  // namespace attention_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ATTENTION_LAUNCH_H_
