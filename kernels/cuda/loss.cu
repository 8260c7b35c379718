// Fused softmax cross-entropy forward and backward (see kernels/cuda/loss.h),
// over dense rows or, for sequences, rows whose classes lie `positions`
// apart (the arithmetic is the same; x[j] below is x[j * positions]),
// the same mathematics as SoftmaxCrossEntropy in worker/loss.cc: row maximum
// subtracted, exp in float, the row's sum in double, loss
// log(sum) - (x[label] - max) in double, gradient
// exp(x - max) * float(scale / sum) - scale * onehot, scale = 1 / n.
// With label smoothing e > 0 (worker/loss.cc's RowCrossEntropy): the row's
// sum of (x - max) in double too, loss (1 - e) nll + e (log(sum) -
// shifted / c), gradient exp(x - max) * float(scale / sum) - scale e / c,
// less scale (1 - e) at the label.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/loss_launch.h"
#include "kernels/cuda/reduce_launch.h"

namespace cohort {
namespace cuda_internal {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int64_t kMaxBlocks = 65535;
// Past every real index: the "no element" of threads beyond the row's end.
constexpr long long kNoIndex = 0x7fffffffffffffffLL;

// A candidate maximum of a row and its column.
struct MaxAt {
  float value;
  long long index;
};

__device__ MaxAt ShuffleDown(MaxAt v, int offset) {
  return {__shfl_down_sync(0xffffffffu, v.value, offset),
          __shfl_down_sync(0xffffffffu, v.index, offset)};
}

// The larger value; among equal values the smaller index, so that the block
// finds the first maximum, as the CPU's sequential strict `>` scan does.
// NaN never wins (see loss.h).
struct FirstMaxOp {
  __device__ MaxAt operator()(MaxAt a, MaxAt b) const {
    if (b.value > a.value || (b.value == a.value && b.index < a.index)) {
      return b;
    }
    return a;
  }
};

// The row's first maximal logit, broadcast to every thread. When no
// element compares (all NaN) it falls back to column 0, as the CPU does.
__device__ MaxAt RowMax(const float* x, int64_t c, int64_t stride,
                        MaxAt* slots) {
  MaxAt best = {-INFINITY, kNoIndex};
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    best = FirstMaxOp()(best, MaxAt{x[j * stride], j});
  }
  best = BlockReduce<kThreads>(best, FirstMaxOp(), slots);
  if (best.index >= c) best = {x[0], 0};
  return best;
}

// Sum over the row of x - m, in double like the CPU (label smoothing only).
__device__ double RowShiftedSum(const float* x, int64_t c, int64_t stride,
                                float m, double* slots) {
  double sum = 0;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    sum += static_cast<double>(x[j * stride] - m);
  }
  return BlockReduce<kThreads>(sum, AddOp(), slots);
}

// Sum over the row of exp(x - m), in double like the CPU.
__device__ double RowExpSum(const float* x, int64_t c, int64_t stride, float m,
                            double* slots) {
  double sum = 0;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    sum += expf(x[j * stride] - m);
  }
  return BlockReduce<kThreads>(sum, AddOp(), slots);
}

// g = softmax(x) * scale - onehot(label) * scale, rounded as the CPU rounds
// it: exp in float, times the float of scale / sum, minus scale. With
// smoothing, (softmax(x) - target) * scale, rounded as the CPU's
// RowCrossEntropy rounds it; kept apart so that e = 0 is unchanged.
__device__ void WriteRowGrad(const float* x, int64_t c, int64_t stride, float m,
                             int64_t label, float scale, float smooth,
                             double sum, float* g) {
  const float s = static_cast<float>(static_cast<double>(scale) / sum);
  if (smooth == 0) {
    for (int64_t j = threadIdx.x; j < c; j += kThreads) {
      float v = expf(x[j * stride] - m) * s;
      if (j == label) v -= scale;
      g[j * stride] = v;
    }
    return;
  }
  const float spread = scale * smooth / static_cast<float>(c);
  const float at_label = scale * (1 - smooth);
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    float v = expf(x[j * stride] - m) * s - spread;
    if (j == label) v -= at_label;
    g[j * stride] = v;
  }
}

// A row whose label is outside [0, c): recorded for the host to report;
// its loss and hit are 0 and its gradient row is zeroed, so nothing reads
// out of bounds and no garbage is left behind.
__device__ void MarkBadRow(int64_t row, int64_t c, int64_t stride, float* g,
                           CrossEntropyWorkspace ws) {
  if (g != nullptr) {
    for (int64_t j = threadIdx.x; j < c; j += kThreads) g[j * stride] = 0;
  }
  if (threadIdx.x == 0) {
    atomicMin(ws.first_bad_row, static_cast<unsigned long long>(row));
    ws.row_loss[row] = 0;
    ws.row_hit[row] = 0;
  }
}

// Rows loop (grid-stride) per block; every thread of a block sees the same
// rows and labels, so the barriers inside the reductions are uniform.
__global__ void CrossEntropyRowsKernel(const float* logits,
                                       const int32_t* labels, int64_t n,
                                       int64_t c, int64_t positions,
                                       float scale, float smooth, float* grad,
                                       CrossEntropyWorkspace ws) {
  __shared__ MaxAt max_slots[kWarps];
  __shared__ double sum_slots[kWarps];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    // Dense rows (positions 1): the row's c logits are contiguous. Sequences:
    // {samples, c, positions}, the row's classes `positions` apart.
    const int64_t base = (row / positions) * c * positions + row % positions;
    const float* x = logits + base;
    float* g = grad != nullptr ? grad + base : nullptr;
    const int64_t label = labels[row];
    if (label < 0 || label >= c) {
      MarkBadRow(row, c, positions, g, ws);
      continue;
    }
    const MaxAt best = RowMax(x, c, positions, max_slots);
    const float m = best.value;
    const double sum = RowExpSum(x, c, positions, m, sum_slots);
    // `smooth` is the same for every thread: the barrier inside is uniform.
    const double shifted =
        smooth != 0 ? RowShiftedSum(x, c, positions, m, sum_slots) : 0;
    if (g != nullptr) {
      WriteRowGrad(x, c, positions, m, label, scale, smooth, sum, g);
    }
    if (threadIdx.x == 0) {
      const double log_sum = log(sum);
      const double nll =
          log_sum - static_cast<double>(x[label * positions] - m);
      double row_loss = nll;
      if (smooth != 0) {
        const double mean_nll = log_sum - shifted / static_cast<double>(c);
        row_loss = (1 - static_cast<double>(smooth)) * nll + smooth * mean_nll;
      }
      ws.row_loss[row] = row_loss;
      ws.row_hit[row] = best.index == label ? 1 : 0;
    }
  }
}

__global__ void CrossEntropyFinishKernel(CrossEntropyWorkspace ws, int64_t n,
                                         float* loss, int64_t* correct) {
  __shared__ double loss_slots[kWarps];
  __shared__ long long hit_slots[kWarps];
  double total = 0;
  long long hits = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    total += ws.row_loss[i];
    hits += ws.row_hit[i];
  }
  total = BlockReduce<kThreads>(total, AddOp(), loss_slots);
  hits = BlockReduce<kThreads>(hits, AddOp(), hit_slots);
  if (threadIdx.x == 0) {
    *loss = n > 0 ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
    if (correct != nullptr) *correct += hits;
  }
}

}  // namespace

void LaunchCrossEntropyRows(const float* logits, const int32_t* labels,
                            int64_t n, int64_t c, int64_t positions,
                            float scale, float smooth, float* grad,
                            CrossEntropyWorkspace ws, cudaStream_t stream) {
  const int blocks = static_cast<int>(n < kMaxBlocks ? n : kMaxBlocks);
  CrossEntropyRowsKernel<<<blocks, kThreads, 0, stream>>>(
      logits, labels, n, c, positions, scale, smooth, grad, ws);
}

void LaunchCrossEntropyFinish(CrossEntropyWorkspace ws, int64_t n, float* loss,
                              int64_t* correct, cudaStream_t stream) {
  CrossEntropyFinishKernel<<<1, kThreads, 0, stream>>>(ws, n, loss, correct);
}

}  // namespace cuda_internal
}  // namespace cohort
