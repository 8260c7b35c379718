// Kernels of kernels/cuda/branch_ops.h, behind the plain-C++ launch
// functions of kernels/cuda/branch_ops_launch.h.
//
// The products are grid-stride loops over 64-bit indices. The plane sums
// run one block per plane (grid-stride over planes), sum in double and
// combine the threads' partial sums in a fixed tree order, so every run
// gives the same bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/branch_ops_launch.h"
#include "kernels/cuda/grid.cuh"

namespace cohort {
namespace gpu {
namespace branch_ops_internal {
namespace {

unsigned int PlaneBlocks(int64_t planes) {
  return static_cast<unsigned int>(planes < kMaxBlocks ? planes : kMaxBlocks);
}

__global__ void MultiplyKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) y[i] *= x[i];
}

__global__ void ScalePlanesKernel(const float* scale, float* y, int64_t n,
                                  int64_t plane) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    y[i] *= scale[i / plane];
  }
}

__global__ void SumPlanesKernel(const float* x, float* out, int64_t planes,
                                int64_t plane) {
  __shared__ double partial[kThreads];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float* row = x + p * plane;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < plane; j += blockDim.x) sum += row[j];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        partial[threadIdx.x] += partial[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) out[p] = static_cast<float>(partial[0]);
    // The next plane overwrites `partial` only after thread 0 has read it.
    __syncthreads();
  }
}

}  // namespace

void LaunchMultiplyInPlace(const float* x, float* y, int64_t n,
                           cudaStream_t stream) {
  MultiplyKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
}

void LaunchScalePlanes(const float* scale, float* y, int64_t planes,
                       int64_t plane, cudaStream_t stream) {
  const int64_t n = planes * plane;
  ScalePlanesKernel<<<Blocks(n), kThreads, 0, stream>>>(scale, y, n, plane);
}

void LaunchSumPlanes(const float* x, float* out, int64_t planes, int64_t plane,
                     cudaStream_t stream) {
  SumPlanesKernel<<<PlaneBlocks(planes), kThreads, 0, stream>>>(x, out, planes,
                                                                plane);
}

}  // namespace branch_ops_internal
}  // namespace gpu
}  // namespace cohort
