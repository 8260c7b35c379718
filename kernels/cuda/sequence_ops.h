// CUDA kernels of the transformer layers other than attention:
// token and positional embeddings, the per-position LayerNorm and the
// conversion of float token targets to class labels. Activations are the
// GPU engine's NCHW sequences (worker/gpu/layers/gpu_layer.h): a per-sample
// {D, L} is stored for the batch as {N, D, L}, element (n, d, t) at
// n * D * L + d * L + t. Embedding weights are {V, D} row-major (torch's
// nn.Embedding), the positional weight {L, D}.
//
// Every kernel is deterministic: sums run in a fixed order (in double
// where they are long), with no float atomics. EmbeddingBackward sorts the
// positions by token id (a stable radix sort) and sums each id's positions
// in order, one thread per (id, feature).
//
// Each function checks its arguments, enqueues on `stream` and returns
// without waiting. Ownership: every pointer is device memory owned by the
// caller; nothing is kept. Thread safety: stateless.
#ifndef COHORT_KERNELS_CUDA_SEQUENCE_OPS_H_
#define COHORT_KERNELS_CUDA_SEQUENCE_OPS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

struct SequenceShape {
  int64_t n = 0;  // samples
  int64_t d = 0;  // features per position
  int64_t l = 0;  // positions
};

// out(n, d, t) = weight[id(n, t), d], ids[n * L + t] the token ids as
// floats ({N, 1, L}). An id outside [0, vocab) (which the CPU engine
// CHECK-fails on; the data set validates ids) gives zeros, and nothing
// outside the weight is read.
absl::Status EmbeddingForward(const SequenceShape& s, int64_t vocab,
                              const float* ids, const float* weight, float* out,
                              cudaStream_t stream);
// grad_weight[id(n, t), d] += grad_out(n, d, t); unless `accumulate`, the
// gradient is zeroed first (weight tying accumulates onto the head's).
// `workspace` (8-byte aligned) holds EmbeddingBackwardWorkspaceBytes(n * l,
// vocab) bytes: the sort's keys, values and scratch.
size_t EmbeddingBackwardWorkspaceBytes(int64_t positions, int64_t vocab);
absl::Status EmbeddingBackward(const SequenceShape& s, int64_t vocab,
                               const float* ids, const float* grad_out,
                               float* grad_weight, bool accumulate,
                               void* workspace, size_t workspace_bytes,
                               cudaStream_t stream);

// out(n, d, t) = in(n, d, t) + weight[t, d]; `out` may equal `in`.
absl::Status PositionalForward(const SequenceShape& s, const float* in,
                               const float* weight, float* out,
                               cudaStream_t stream);
// grad_weight[t, d] = sum over n of grad_out(n, d, t) (overwritten).
absl::Status PositionalWeightGrad(const SequenceShape& s, const float* grad_out,
                                  float* grad_weight, cudaStream_t stream);

// LayerNorm of every position over its D features (torch nn.LayerNorm(D)
// on [N, L, D]), biased variance: y = (x - mean) * invstd * weight + bias,
// weight and bias {D} (both null: no affine); mean and invstd get N * L
// floats (n * L + t) for backward.
absl::Status PositionNormForward(const SequenceShape& s, float eps,
                                 const float* x, const float* weight,
                                 const float* bias, float* y, float* mean,
                                 float* invstd, cudaStream_t stream);
// dx (unless null) = invstd (gy - mean(gy) - xh mean(gy xh)), gy = dy *
// weight; weight_grad, bias_grad (unless weight is null) = the sums of
// dy * xh and dy over every position, overwritten. dx may not alias dy.
absl::Status PositionNormBackward(const SequenceShape& s, const float* x,
                                  const float* dy, const float* weight,
                                  const float* mean, const float* invstd,
                                  float* dx, float* weight_grad,
                                  float* bias_grad, cudaStream_t stream);

// labels[i] = targets[i] as an int32 class when it is a whole number in
// [0, 2^31), else -1 (which the cross-entropy kernels report as a bad
// label). `n` elements.
absl::Status FloatTargetsToLabels(const float* targets, int32_t* labels,
                                  int64_t n, cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_SEQUENCE_OPS_H_
