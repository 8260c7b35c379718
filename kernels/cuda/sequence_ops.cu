// Kernels of kernels/cuda/sequence_ops.h, behind the plain-C++ launch
// functions of kernels/cuda/sequence_ops_launch.h.
//
// Elementwise kernels are grid-stride loops over 64-bit indices with the
// position fastest, so neighbouring threads touch neighbouring addresses of
// an {N, D, L} tensor. The per-position LayerNorm gives one thread a
// position and walks its D features with stride L (coalesced across the
// threads of a warp); its parameter gradients are one block per feature,
// reduced in a fixed order (cuda_internal::BlockReduce). The embedding
// gradient sorts (id, position) pairs with cub's stable radix sort, then
// one block per run of equal ids sums its positions in order for every
// feature: each gradient element is written by one thread, in one order.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/reduce_launch.h"
#include "kernels/cuda/sequence_ops_launch.h"

namespace cohort {
namespace gpu {
namespace sequence_ops_internal {
namespace {

using cuda_internal::AddOp;
using cuda_internal::BlockReduce;
using cuda_internal::kWarpSize;

// The id at ids[i] when it is a whole number in [0, vocab), else -1.
__device__ int64_t TokenId(const float* ids, int64_t i, int64_t vocab) {
  const float f = ids[i];
  if (!(f >= 0.0f) || !(f < static_cast<float>(vocab))) return -1;
  const int64_t id = static_cast<int64_t>(f);
  return static_cast<float>(id) == f && id < vocab ? id : -1;
}

__global__ void EmbeddingForwardKernel(SeqArgs s, int64_t vocab,
                                       const float* ids, const float* weight,
                                       float* out) {
  const int64_t total = s.n * s.d * s.l;
  for (int64_t i = FirstIndex(); i < total; i += GridStride()) {
    const int64_t t = i % s.l;
    const int64_t d = (i / s.l) % s.d;
    const int64_t n = i / (s.l * s.d);
    const int64_t id = TokenId(ids, n * s.l + t, vocab);
    out[i] = id < 0 ? 0.0f : weight[id * s.d + d];
  }
}

// keys[p] = the id at position p (vocab when invalid), values[p] = p.
__global__ void EmbeddingKeysKernel(int64_t positions, int64_t vocab,
                                    const float* ids, int32_t* keys,
                                    int32_t* values) {
  for (int64_t p = FirstIndex(); p < positions; p += GridStride()) {
    const int64_t id = TokenId(ids, p, vocab);
    keys[p] = static_cast<int32_t>(id < 0 ? vocab : id);
    values[p] = static_cast<int32_t>(p);
  }
}

// One block per sorted index that starts a run of equal ids: the sum over
// the run's positions (in increasing order) of grad_out, per feature.
__global__ void EmbeddingRunsKernel(SeqArgs s, int64_t vocab,
                                    const int32_t* keys,
                                    const int32_t* positions,
                                    const float* grad_out, float* grad_weight) {
  const int64_t count = s.n * s.l;
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const int32_t id = keys[i];
    if (id >= vocab || (i > 0 && keys[i - 1] == id)) continue;
    int64_t end = i + 1;
    while (end < count && keys[end] == id) ++end;
    for (int64_t d = threadIdx.x; d < s.d; d += blockDim.x) {
      float sum = 0;
      for (int64_t j = i; j < end; ++j) {
        const int64_t p = positions[j];
        sum += grad_out[((p / s.l) * s.d + d) * s.l + p % s.l];
      }
      grad_weight[id * s.d + d] += sum;
    }
  }
}

// The workspace: keys and values in and out, then cub's scratch.
struct SortSpace {
  int32_t *keys_in, *keys_out, *values_in, *values_out;
  void* scratch;
  size_t scratch_bytes;
};

size_t Align(size_t bytes) { return (bytes + 255) / 256 * 256; }

int EndBit(int64_t vocab) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) <= vocab) ++bits;
  return bits;  // keys lie in [0, vocab]
}

size_t ScratchBytes(int64_t positions, int64_t vocab) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int32_t*>(nullptr),
      static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
      static_cast<int32_t*>(nullptr), static_cast<int>(positions), 0,
      EndBit(vocab));
  return bytes;
}

SortSpace Carve(void* base, int64_t positions, int64_t vocab) {
  char* p = static_cast<char*>(base);
  const size_t array = Align(positions * sizeof(int32_t));
  SortSpace w;
  w.keys_in = reinterpret_cast<int32_t*>(p);
  w.keys_out = reinterpret_cast<int32_t*>(p + array);
  w.values_in = reinterpret_cast<int32_t*>(p + 2 * array);
  w.values_out = reinterpret_cast<int32_t*>(p + 3 * array);
  w.scratch = p + 4 * array;
  w.scratch_bytes = ScratchBytes(positions, vocab);
  return w;
}

__global__ void PositionalForwardKernel(SeqArgs s, const float* in,
                                        const float* weight, float* out) {
  const int64_t total = s.n * s.d * s.l;
  for (int64_t i = FirstIndex(); i < total; i += GridStride()) {
    const int64_t t = i % s.l;
    const int64_t d = (i / s.l) % s.d;
    out[i] = in[i] + weight[t * s.d + d];
  }
}

// One thread per (d, t), summing over the samples in order.
__global__ void PositionalWeightGradKernel(SeqArgs s, const float* grad_out,
                                           float* grad_weight) {
  const int64_t total = s.d * s.l;
  for (int64_t i = FirstIndex(); i < total; i += GridStride()) {
    const int64_t t = i % s.l;
    const int64_t d = i / s.l;
    float sum = 0;
    for (int64_t n = 0; n < s.n; ++n) sum += grad_out[n * total + i];
    grad_weight[t * s.d + d] = sum;
  }
}

// One thread per position (n, t); its features at stride L.
__global__ void PositionNormForwardKernel(SeqArgs s, float eps, const float* x,
                                          const float* weight,
                                          const float* bias, float* y,
                                          float* mean_out, float* invstd_out) {
  const int64_t columns = s.n * s.l;
  for (int64_t c = FirstIndex(); c < columns; c += GridStride()) {
    const int64_t n = c / s.l, t = c % s.l;
    const float* xc = x + n * s.d * s.l + t;
    float* yc = y + n * s.d * s.l + t;
    double sum = 0;
    for (int64_t d = 0; d < s.d; ++d) sum += xc[d * s.l];
    const double mean = sum / static_cast<double>(s.d);
    double var = 0;
    for (int64_t d = 0; d < s.d; ++d) {
      const double v = xc[d * s.l] - mean;
      var += v * v;
    }
    const double invstd = 1.0 / sqrt(var / static_cast<double>(s.d) + eps);
    mean_out[c] = static_cast<float>(mean);
    invstd_out[c] = static_cast<float>(invstd);
    const float fm = static_cast<float>(mean);
    const float fi = static_cast<float>(invstd);
    for (int64_t d = 0; d < s.d; ++d) {
      const float xh = (xc[d * s.l] - fm) * fi;
      yc[d * s.l] = weight == nullptr ? xh : xh * weight[d] + bias[d];
    }
  }
}

__global__ void PositionNormInputGradKernel(SeqArgs s, const float* x,
                                            const float* dy,
                                            const float* weight,
                                            const float* mean,
                                            const float* invstd, float* dx) {
  const int64_t columns = s.n * s.l;
  const double inv_d = 1.0 / static_cast<double>(s.d);
  for (int64_t c = FirstIndex(); c < columns; c += GridStride()) {
    const int64_t base = (c / s.l) * s.d * s.l + c % s.l;
    const double mu = mean[c], is = invstd[c];
    double s1 = 0, s2 = 0;
    for (int64_t d = 0; d < s.d; ++d) {
      const int64_t i = base + d * s.l;
      const double gy =
          static_cast<double>(dy[i]) * (weight == nullptr ? 1.0 : weight[d]);
      s1 += gy;
      s2 += gy * (x[i] - mu) * is;
    }
    const double mean_gy = s1 * inv_d, mean_gy_xh = s2 * inv_d;
    for (int64_t d = 0; d < s.d; ++d) {
      const int64_t i = base + d * s.l;
      const double gy =
          static_cast<double>(dy[i]) * (weight == nullptr ? 1.0 : weight[d]);
      const double xh = (x[i] - mu) * is;
      dx[i] = static_cast<float>(is * (gy - mean_gy - xh * mean_gy_xh));
    }
  }
}

// One block per feature d: the sums over every position of dy * xh and dy.
__global__ void PositionNormParamGradKernel(SeqArgs s, const float* x,
                                            const float* dy, const float* mean,
                                            const float* invstd,
                                            float* weight_grad,
                                            float* bias_grad) {
  __shared__ double slots[kThreads / kWarpSize];
  const int64_t columns = s.n * s.l;
  for (int64_t d = blockIdx.x; d < s.d; d += gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t c = threadIdx.x; c < columns; c += kThreads) {
      const int64_t i = (c / s.l) * s.d * s.l + d * s.l + c % s.l;
      const double g = dy[i];
      sw += g * (static_cast<double>(x[i]) - mean[c]) * invstd[c];
      sb += g;
    }
    sw = BlockReduce<kThreads>(sw, AddOp(), slots);
    sb = BlockReduce<kThreads>(sb, AddOp(), slots);
    if (threadIdx.x == 0) {
      weight_grad[d] = static_cast<float>(sw);
      bias_grad[d] = static_cast<float>(sb);
    }
  }
}

__global__ void FloatTargetsToLabelsKernel(const float* targets,
                                           int32_t* labels, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float f = targets[i];
    int32_t label = -1;
    if (f >= 0.0f && f < 2147483648.0f && floorf(f) == f) {
      label = static_cast<int32_t>(f);
    }
    labels[i] = label;
  }
}

}  // namespace

void LaunchEmbeddingForward(const SeqArgs& s, int64_t vocab, const float* ids,
                            const float* weight, float* out,
                            cudaStream_t stream) {
  EmbeddingForwardKernel<<<Blocks(s.n * s.d * s.l), kThreads, 0, stream>>>(
      s, vocab, ids, weight, out);
}

size_t EmbeddingSortBytes(int64_t positions, int64_t vocab) {
  return 4 * Align(positions * sizeof(int32_t)) +
         ScratchBytes(positions, vocab);
}

cudaError_t LaunchEmbeddingScatter(const SeqArgs& s, int64_t vocab,
                                   const float* ids, const float* grad_out,
                                   float* grad_weight, void* workspace,
                                   size_t workspace_bytes,
                                   cudaStream_t stream) {
  const int64_t count = s.n * s.l;
  SortSpace w = Carve(workspace, count, vocab);
  EmbeddingKeysKernel<<<Blocks(count), kThreads, 0, stream>>>(
      count, vocab, ids, w.keys_in, w.values_in);
  const cudaError_t e = cub::DeviceRadixSort::SortPairs(
      w.scratch, w.scratch_bytes, w.keys_in, w.keys_out, w.values_in,
      w.values_out, static_cast<int>(count), 0, EndBit(vocab), stream);
  if (e != cudaSuccess) return e;
  const int64_t blocks = count < kMaxBlocks ? count : kMaxBlocks;
  // Features across a block's threads: a warp's worth at least.
  EmbeddingRunsKernel<<<static_cast<unsigned int>(blocks), 128, 0, stream>>>(
      s, vocab, w.keys_out, w.values_out, grad_out, grad_weight);
  return cudaSuccess;
}

void LaunchPositionalForward(const SeqArgs& s, const float* in,
                             const float* weight, float* out,
                             cudaStream_t stream) {
  PositionalForwardKernel<<<Blocks(s.n * s.d * s.l), kThreads, 0, stream>>>(
      s, in, weight, out);
}

void LaunchPositionalWeightGrad(const SeqArgs& s, const float* grad_out,
                                float* grad_weight, cudaStream_t stream) {
  PositionalWeightGradKernel<<<Blocks(s.d * s.l), kThreads, 0, stream>>>(
      s, grad_out, grad_weight);
}

void LaunchPositionNormForward(const SeqArgs& s, float eps, const float* x,
                               const float* weight, const float* bias, float* y,
                               float* mean, float* invstd,
                               cudaStream_t stream) {
  PositionNormForwardKernel<<<Blocks(s.n * s.l), kThreads, 0, stream>>>(
      s, eps, x, weight, bias, y, mean, invstd);
}

void LaunchPositionNormBackward(const SeqArgs& s, const float* x,
                                const float* dy, const float* weight,
                                const float* mean, const float* invstd,
                                float* dx, float* weight_grad, float* bias_grad,
                                cudaStream_t stream) {
  if (weight != nullptr) {
    const int64_t blocks = s.d < kMaxBlocks ? s.d : kMaxBlocks;
    PositionNormParamGradKernel<<<static_cast<unsigned int>(blocks), kThreads,
                                  0, stream>>>(s, x, dy, mean, invstd,
                                               weight_grad, bias_grad);
  }
  if (dx != nullptr) {
    PositionNormInputGradKernel<<<Blocks(s.n * s.l), kThreads, 0, stream>>>(
        s, x, dy, weight, mean, invstd, dx);
  }
}

void LaunchFloatTargetsToLabels(const float* targets, int32_t* labels,
                                int64_t n, cudaStream_t stream) {
  FloatTargetsToLabelsKernel<<<Blocks(n), kThreads, 0, stream>>>(targets,
                                                                 labels, n);
}

}  // namespace sequence_ops_internal
}  // namespace gpu
}  // namespace cohort
