// Kernels of kernels/cuda/adaptive_pool.h, behind the plain-C++ launch
// functions of kernels/cuda/adaptive_pool_launch.h: grid-stride loops over
// 64-bit indices, one thread per output (forward) or per input (backward).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/adaptive_pool.h"
#include "kernels/cuda/adaptive_pool_launch.h"
#include "kernels/cuda/grid.cuh"

namespace cohort {
namespace gpu {
namespace adaptive_pool_internal {
namespace {

// The number of inputs in output cell (i, j)'s window.
__device__ float WindowSize(const AdaptivePoolArgs& a, int64_t i, int64_t j) {
  const int64_t rows =
      AdaptiveEnd(i, a.in_h, a.out_h) - AdaptiveBegin(i, a.in_h, a.out_h);
  const int64_t cols =
      AdaptiveEnd(j, a.in_w, a.out_w) - AdaptiveBegin(j, a.in_w, a.out_w);
  return static_cast<float>(rows * cols);
}

__global__ void ForwardKernel(AdaptivePoolArgs a, const float* in, float* out) {
  const int64_t out_plane = a.out_h * a.out_w;
  const int64_t n = a.planes * out_plane;
  for (int64_t o = FirstIndex(); o < n; o += GridStride()) {
    const int64_t p = o / out_plane, i = o % out_plane / a.out_w,
                  j = o % a.out_w;
    const float* src = in + p * a.in_h * a.in_w;
    const int64_t h1 = AdaptiveEnd(i, a.in_h, a.out_h);
    const int64_t w0 = AdaptiveBegin(j, a.in_w, a.out_w);
    const int64_t w1 = AdaptiveEnd(j, a.in_w, a.out_w);
    float sum = 0;
    for (int64_t h = AdaptiveBegin(i, a.in_h, a.out_h); h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) sum += src[h * a.in_w + w];
    }
    out[o] = sum / WindowSize(a, i, j);
  }
}

// Gathers from the outputs whose windows hold the input, so no atomics.
__global__ void BackwardKernel(AdaptivePoolArgs a, const float* dy, float* dx) {
  const int64_t in_plane = a.in_h * a.in_w;
  const int64_t n = a.planes * in_plane;
  for (int64_t x = FirstIndex(); x < n; x += GridStride()) {
    const int64_t p = x / in_plane, h = x % in_plane / a.in_w, w = x % a.in_w;
    const float* g = dy + p * a.out_h * a.out_w;
    const int64_t i1 = AdaptiveLastCover(h, a.in_h, a.out_h);
    const int64_t j0 = AdaptiveFirstCover(w, a.in_w, a.out_w);
    const int64_t j1 = AdaptiveLastCover(w, a.in_w, a.out_w);
    float sum = 0;
    for (int64_t i = AdaptiveFirstCover(h, a.in_h, a.out_h); i <= i1; ++i) {
      for (int64_t j = j0; j <= j1; ++j) {
        sum += g[i * a.out_w + j] / WindowSize(a, i, j);
      }
    }
    dx[x] = sum;
  }
}

}  // namespace

void LaunchAdaptiveAvgPool2dForward(const AdaptivePoolArgs& a, const float* in,
                                    float* out, cudaStream_t stream) {
  ForwardKernel<<<Blocks(a.planes * a.out_h * a.out_w), kThreads, 0, stream>>>(
      a, in, out);
}

void LaunchAdaptiveAvgPool2dBackward(const AdaptivePoolArgs& a,
                                     const float* grad_out, float* grad_in,
                                     cudaStream_t stream) {
  BackwardKernel<<<Blocks(a.planes * a.in_h * a.in_w), kThreads, 0, stream>>>(
      a, grad_out, grad_in);
}

}  // namespace adaptive_pool_internal
}  // namespace gpu
}  // namespace cohort
