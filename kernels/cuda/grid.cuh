// The launch shape of the elementwise kernels: blocks of kThreads threads,
// a grid capped at kMaxBlocks blocks, and grid-stride loops over 64-bit
// indices, so that any n works with a capped grid:
//
//   for (int64_t i = FirstIndex(); i < n; i += GridStride()) ...
//   Kernel<<<Blocks(n), kThreads, 0, stream>>>(...);
//
// For .cu files only (nvcc): it uses CUDA's built-in variables and
// __device__ functions. Include it from a cuda_library's cu_srcs and list it
// in that target's cu_hdrs.
#ifndef COHORT_KERNELS_CUDA_GRID_CUH_
#define COHORT_KERNELS_CUDA_GRID_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace cohort {
namespace gpu {

// Threads per block. A power of two: block reductions halve it.
inline constexpr int kThreads = 256;

// The most blocks of a grid's x dimension that any device accepts.
inline constexpr int64_t kMaxBlocks = 65535;

// Enough blocks to give each thread about one of `n` elements, at least one
// and at most kMaxBlocks: the grid-stride loops cover the rest.
inline unsigned int Blocks(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned int>(blocks);
}

// The calling thread's index in the grid: the first index of its loop.
__device__ inline int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// The number of threads in the grid: the step of a grid-stride loop.
__device__ inline int64_t GridStride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_GRID_CUH_
