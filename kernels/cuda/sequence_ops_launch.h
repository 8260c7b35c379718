// The boundary between kernels/cuda/sequence_ops.cc (gcc, absl::Status) and
// kernels/cuda/sequence_ops.cu (nvcc): plain C++ types and cudaStream_t
// only. Each Launch* enqueues on `stream` and returns at once; the caller
// checks LaunchStatus right after. Arguments are checked by
// sequence_ops.cc. Use kernels/cuda/sequence_ops.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_SEQUENCE_OPS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_SEQUENCE_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cohort {
namespace gpu {
namespace sequence_ops_internal {

struct SeqArgs {
  int64_t n, d, l;
};

void LaunchEmbeddingForward(const SeqArgs& s, int64_t vocab, const float* ids,
                            const float* weight, float* out,
                            cudaStream_t stream);
// Bytes of the embedding gradient's workspace for `positions` ids.
size_t EmbeddingSortBytes(int64_t positions, int64_t vocab);
// Adds onto grad_weight (the caller zeroes it first when it must), through
// a stable sort of the positions by id in `workspace`. Returns the sort's
// CUDA error (cudaSuccess when none).
cudaError_t LaunchEmbeddingScatter(const SeqArgs& s, int64_t vocab,
                                   const float* ids, const float* grad_out,
                                   float* grad_weight, void* workspace,
                                   size_t workspace_bytes, cudaStream_t stream);
void LaunchPositionalForward(const SeqArgs& s, const float* in,
                             const float* weight, float* out,
                             cudaStream_t stream);
void LaunchPositionalWeightGrad(const SeqArgs& s, const float* grad_out,
                                float* grad_weight, cudaStream_t stream);
void LaunchPositionNormForward(const SeqArgs& s, float eps, const float* x,
                               const float* weight, const float* bias, float* y,
                               float* mean, float* invstd, cudaStream_t stream);
void LaunchPositionNormBackward(const SeqArgs& s, const float* x,
                                const float* dy, const float* weight,
                                const float* mean, const float* invstd,
                                float* dx, float* weight_grad, float* bias_grad,
                                cudaStream_t stream);
void LaunchFloatTargetsToLabels(const float* targets, int32_t* labels,
                                int64_t n, cudaStream_t stream);

}  // namespace sequence_ops_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_SEQUENCE_OPS_LAUNCH_H_
