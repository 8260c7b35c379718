// Kernels of kernels/cuda/prelu.h, behind the plain-C++ launch functions of
// kernels/cuda/prelu_launch.h: elementwise grid-stride loops over 64-bit
// indices, and one block per channel for the slope gradients.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/prelu_launch.h"

namespace cohort {
namespace gpu {
namespace prelu_internal {
namespace {

__device__ int64_t Channel(const PreluArgs& a, int64_t i) {
  return i / a.inner % a.channels;
}

__global__ void ForwardKernel(PreluArgs a, const float* in, const float* slope,
                              float* out) {
  const int64_t n = a.outer * a.channels * a.inner;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float x = in[i];
    out[i] = x > 0.0f ? x : slope[Channel(a, i)] * x;
  }
}

__global__ void InputGradKernel(PreluArgs a, const float* in,
                                const float* slope, const float* dy,
                                float* dx) {
  const int64_t n = a.outer * a.channels * a.inner;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    dx[i] = in[i] > 0.0f ? dy[i] : slope[Channel(a, i)] * dy[i];
  }
}

// The block's sum of `v` (thread 0 gets it), in a fixed tree order.
__device__ double BlockSum(double v, double* partial) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return partial[0];
}

// One block per channel, over its (outer, inner) elements.
__global__ void SlopeGradKernel(PreluArgs a, const float* in, const float* dy,
                                float* grad_slope) {
  __shared__ double partial[kThreads];
  const int64_t count = a.outer * a.inner;
  for (int64_t c = blockIdx.x; c < a.channels; c += gridDim.x) {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const int64_t at = (i / a.inner * a.channels + c) * a.inner + i % a.inner;
      const float x = in[at];
      if (x <= 0.0f) sum += static_cast<double>(x) * dy[at];
    }
    const double total = BlockSum(sum, partial);
    if (threadIdx.x == 0) grad_slope[c] = static_cast<float>(total);
    __syncthreads();  // partial[0] is read before the next channel's sum
  }
}

}  // namespace

void LaunchPreluForward(const PreluArgs& a, const float* in, const float* slope,
                        float* out, cudaStream_t stream) {
  ForwardKernel<<<Blocks(a.outer * a.channels * a.inner), kThreads, 0,
                  stream>>>(a, in, slope, out);
}

void LaunchPreluInputGrad(const PreluArgs& a, const float* in,
                          const float* slope, const float* grad_out,
                          float* grad_in, cudaStream_t stream) {
  InputGradKernel<<<Blocks(a.outer * a.channels * a.inner), kThreads, 0,
                    stream>>>(a, in, slope, grad_out, grad_in);
}

void LaunchPreluSlopeGrad(const PreluArgs& a, const float* in,
                          const float* grad_out, float* grad_slope,
                          cudaStream_t stream) {
  const int64_t blocks = a.channels < kMaxBlocks ? a.channels : kMaxBlocks;
  SlopeGradKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      a, in, grad_out, grad_slope);
}

}  // namespace prelu_internal
}  // namespace gpu
}  // namespace cohort
