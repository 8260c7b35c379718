// Multi-head scaled dot-product attention on the GPU, tiled with an online
// softmax (FlashAttention's scheme): the L x L score matrix is never
// materialised. Forward keeps, per (sample, head, query), the logsumexp of
// the scaled scores; backward recomputes the probabilities from Q, K and
// that logsumexp tile by tile.
//
// Layout. Q, K and V are read straight from a fused QKV projection's
// output, 3D features per position with D = heads * head_dim: feature f of
// sample n at position t lies at qkv[f * feature_stride + n * sample_stride
// + t] (positions contiguous), Q the features [0, D), K [D, 2D), V [2D, 3D),
// head h using features h * head_dim .. (h + 1) * head_dim of each (torch
// nn.MultiheadAttention's in_proj split). O (D features) and its gradient
// use out_feature_stride / out_sample_stride likewise, grad_qkv the QKV
// strides. ChannelMajor() gives the CPU engine's {3D, N, L} layout
// (worker/layers/layer.h), SampleMajor() the GPU engine's NCHW {N, 3D, L}.
//
// Mathematics: P = softmax(scale * Q K^T) per head, masked causally (key
// t' > t dropped) unless bidirectional, the row maximum subtracted; O = P V.
// Backward: Di = rowsum(dO * O), dV = P^T dO, dP = dO V^T, dS = P (dP - Di),
// dQ = scale dS K, dK = scale dS^T Q. Float32 throughout (inputs, products
// and accumulators); there is no dropout on P.
//
// Backward runs two passes: one block per key tile sums dK and dV over the
// query tiles, another per query tile sums dQ over the key tiles
// (recomputing P and dP). Every gradient element is then written by one
// thread in a fixed order: results are deterministic, with no atomics and
// no zeroing pass, at the price of computing the scores twice.
//
// Limits: head_dim in [1, 128]; any L >= 1. Each function checks its
// arguments before touching the device and returns after enqueueing its
// kernels on `stream` (OK: the launches were accepted).
//
// Ownership: every pointer is device memory owned by the caller; nothing is
// kept past the return. Thread safety: stateless.
#ifndef COHORT_KERNELS_CUDA_ATTENTION_H_
#define COHORT_KERNELS_CUDA_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

struct AttentionGeometry {
  int64_t n = 0;         // samples
  int64_t l = 0;         // positions
  int64_t heads = 1;     // H
  int64_t head_dim = 0;  // D / H, at most kMaxAttentionHeadDim
  bool causal = true;    // false: bidirectional
  int64_t qkv_feature_stride = 0, qkv_sample_stride = 0;
  int64_t out_feature_stride = 0, out_sample_stride = 0;
  // The scores' scale; 0 means 1 / sqrt(head_dim).
  float scale = 0;
};

inline constexpr int64_t kMaxAttentionHeadDim = 128;

// {3D, N, L} in, {D, N, L} out (the CPU engine's channel-major layout).
AttentionGeometry ChannelMajorAttention(int64_t n, int64_t l, int64_t heads,
                                        int64_t head_dim, bool causal);
// {N, 3D, L} in, {N, D, L} out (the GPU engine's NCHW layout).
AttentionGeometry SampleMajorAttention(int64_t n, int64_t l, int64_t heads,
                                       int64_t head_dim, bool causal);

// Floats of the per-row statistics (the logsumexp, and Di in backward):
// n * heads * l each.
int64_t AttentionRowCount(const AttentionGeometry& g);

// out = attention(qkv); lse[(n * heads + h) * l + t] = the row's logsumexp
// of the scaled scores, for AttentionBackward.
absl::Status AttentionForward(const AttentionGeometry& g, const float* qkv,
                              float* out, float* lse, cudaStream_t stream);

// grad_qkv (every element overwritten) = dLoss/dQKV from grad_out of the
// forward that wrote `out` and `lse`. `delta` is scratch of
// AttentionRowCount floats (Di). grad_qkv must not overlap qkv.
absl::Status AttentionBackward(const AttentionGeometry& g, const float* qkv,
                               const float* out, const float* grad_out,
                               const float* lse, float* delta, float* grad_qkv,
                               cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ATTENTION_H_
