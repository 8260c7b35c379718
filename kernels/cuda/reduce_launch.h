// The narrow interface between the nvcc-compiled reductions (reduce.cu) and
// their host wrappers (reduce.cc): plain C++ types and cudaStream_t only, so
// that nvcc never sees absl. Use kernels/cuda/reduce.h instead.
//
// Each Launch* function enqueues one kernel on `stream` and returns at once;
// the caller checks the launch with LaunchStatus. Arguments are validated by
// the wrappers.
#ifndef COHORT_KERNELS_CUDA_REDUCE_LAUNCH_H_
#define COHORT_KERNELS_CUDA_REDUCE_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cohort {
namespace cuda_internal {

enum class ReduceOp { kSum, kSumSquares, kMaxAbs };

// Threads per block of every reduction kernel (a multiple of the warp).
constexpr int kReduceThreads = 256;

// Blocks of the first pass over n elements: about 8 elements per thread, at
// most 1024. A function of n alone, never of the device, so that the order
// of additions (and so the float result) is the same on every run and
// every GPU.
inline int ReducePartialBlocks(int64_t n) {
  const int64_t per_block = int64_t{kReduceThreads} * 8;
  const int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) return 1;
  return blocks > 1024 ? 1024 : static_cast<int>(blocks);
}

// Device scratch for the per-block partial results (doubles).
inline size_t ReducePartialBytes(int64_t n) {
  return static_cast<size_t>(ReducePartialBlocks(n)) * sizeof(double);
}

// First pass: partials[b] = op over block b's share of x[0, n), in double.
void LaunchReducePartials(ReduceOp op, const float* x, int64_t n,
                          double* partials, int blocks, cudaStream_t stream);

// Second pass, one block: *out = op over partials[0, blocks), as float.
void LaunchReduceFinish(ReduceOp op, const double* partials, int blocks,
                        float* out, cudaStream_t stream);

// out[j] = sum over i of x[i * cols + j] (x is [rows, cols], row-major).
void LaunchColumnSums(const float* x, int64_t rows, int64_t cols, float* out,
                      cudaStream_t stream);

// out[i] = sum over j of x[i * cols + j].
void LaunchRowSums(const float* x, int64_t rows, int64_t cols, float* out,
                   cudaStream_t stream);

#ifdef __CUDACC__
// Device helpers shared by reduce.cu and loss.cu (nvcc only).

constexpr int kWarpSize = 32;

__device__ inline float ShuffleDown(float v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ inline double ShuffleDown(double v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ inline long long ShuffleDown(long long v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}

struct AddOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Combines `v` over a block of exactly kThreads threads (a multiple of the
// warp; every thread must call it, the same number of times) and returns the
// result to every thread. The order of combination is fixed -- a shuffle
// tree within each warp, then the warps in order -- so sums are
// deterministic. `slots` is shared memory for kThreads / kWarpSize values;
// it may be reused by the next call (the first barrier protects it).
template <int kThreads, typename T, typename Combine>
__device__ T BlockReduce(T v, Combine combine, T* slots) {
  static_assert(kThreads % kWarpSize == 0, "whole warps only");
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = combine(v, ShuffleDown(v, offset));
  }
  __syncthreads();  // every thread has read the previous call's result
  if (threadIdx.x % kWarpSize == 0) slots[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T total = slots[0];
    for (int w = 1; w < kThreads / kWarpSize; ++w) {
      total = combine(total, slots[w]);
    }
    slots[0] = total;
  }
  __syncthreads();
  return slots[0];
}
#endif  // __CUDACC__

}  // namespace cuda_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_REDUCE_LAUNCH_H_
