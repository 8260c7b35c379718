// Gradient clipping kernels (see kernels/cuda/grad_ops.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grad_ops_launch.h"
#include "kernels/cuda/grid.cuh"

namespace cohort {
namespace cuda_internal {
namespace {

using gpu::Blocks;
using gpu::FirstIndex;
using gpu::GridStride;
using gpu::kThreads;

__global__ void ClampKernel(float* g, int64_t n, float limit) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    g[i] = fminf(limit, fmaxf(-limit, g[i]));
  }
}

// Every thread derives the same scale from the same scalar (one read each,
// served from cache), which saves a kernel and a round trip.
__global__ void ClipToNormKernel(float* g, int64_t n, const float* sum_squares,
                                 double max_norm) {
  const double norm = sqrt(static_cast<double>(*sum_squares));
  const double ratio = max_norm / (norm + 1e-6);
  if (!(ratio < 1.0)) return;  // within the norm (or NaN): unchanged
  const float scale = static_cast<float>(ratio);
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    g[i] = __fmul_rn(g[i], scale);
  }
}

// The CPU engine's arithmetic, operation for operation (worker/engine/
// cpu_engine.cc: Accumulate, FinishAccumulated), without fused multiply-adds.
__global__ void AccumulateKernel(const float* g, int64_t n, float weight,
                                 bool first, float* acc) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float w = __fmul_rn(weight, g[i]);
    acc[i] = first ? w : __fadd_rn(acc[i], w);
  }
}

__global__ void FinishAccumulatedKernel(const float* acc, int64_t n,
                                        float weight, float scale, float* g) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    g[i] = __fmul_rn(__fadd_rn(acc[i], __fmul_rn(weight, g[i])), scale);
  }
}

}  // namespace

void LaunchAccumulate(const float* g, int64_t n, float weight, bool first,
                      float* acc, cudaStream_t stream) {
  AccumulateKernel<<<Blocks(n), kThreads, 0, stream>>>(g, n, weight, first,
                                                       acc);
}

void LaunchFinishAccumulated(const float* acc, int64_t n, float weight,
                             float scale, float* g, cudaStream_t stream) {
  FinishAccumulatedKernel<<<Blocks(n), kThreads, 0, stream>>>(acc, n, weight,
                                                              scale, g);
}

void LaunchClamp(float* g, int64_t n, float limit, cudaStream_t stream) {
  ClampKernel<<<Blocks(n), kThreads, 0, stream>>>(g, n, limit);
}

void LaunchClipToNorm(float* g, int64_t n, const float* sum_squares,
                      double max_norm, cudaStream_t stream) {
  ClipToNormKernel<<<Blocks(n), kThreads, 0, stream>>>(g, n, sum_squares,
                                                       max_norm);
}

}  // namespace cuda_internal
}  // namespace cohort
