// Reductions over float buffers (see kernels/cuda/reduce.h). Every kernel
// accumulates in double and combines in a fixed order, so results are
// deterministic: the same bits on every run and every GPU.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/reduce_launch.h"

namespace cohort {
namespace cuda_internal {
namespace {

constexpr int kThreads = kReduceThreads;

// Columns per block of ColumnSumsKernel (one warp across) and the threads
// that share a column's rows.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 16;

// Upper bound on blocks of the row-per-block and tile-per-block kernels;
// they loop (grid-stride) over the rest.
constexpr int64_t kMaxBlocks = 65535;

// The larger of two absolute values; NaN wins, so that a NaN anywhere in a
// gradient shows in its max-abs rather than being skipped.
struct MaxNanOp {
  __device__ double operator()(double a, double b) const {
    return (isnan(a) || a >= b) ? a : b;
  }
};

template <ReduceOp kOp>
__device__ double Map(float x) {
  if (kOp == ReduceOp::kSum) return x;
  if (kOp == ReduceOp::kSumSquares) return static_cast<double>(x) * x;
  return fabs(static_cast<double>(x));
}

template <ReduceOp kOp>
__device__ double Combine(double a, double b) {
  return kOp == ReduceOp::kMaxAbs ? MaxNanOp()(a, b) : a + b;
}

template <ReduceOp kOp>
struct CombineOp {
  __device__ double operator()(double a, double b) const {
    return Combine<kOp>(a, b);
  }
};

// 0 is the identity of all three: sums, and max of absolute values.
template <ReduceOp kOp>
__global__ void PartialsKernel(const float* x, int64_t n, double* partials) {
  __shared__ double slots[kThreads / kWarpSize];
  double acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    acc = Combine<kOp>(acc, Map<kOp>(x[i]));
  }
  acc = BlockReduce<kThreads>(acc, CombineOp<kOp>(), slots);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <ReduceOp kOp>
__global__ void FinishKernel(const double* partials, int blocks, float* out) {
  __shared__ double slots[kThreads / kWarpSize];
  double acc = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) {
    acc = Combine<kOp>(acc, partials[i]);
  }
  acc = BlockReduce<kThreads>(acc, CombineOp<kOp>(), slots);
  if (threadIdx.x == 0) *out = static_cast<float>(acc);
}

// Block (kColumnTile, kRowLanes): threadIdx.x picks the column within the
// tile (consecutive threads read consecutive addresses), threadIdx.y the
// rows y, y + kRowLanes, ...; the kRowLanes partial sums of a column are then
// added in order of y.
__global__ void ColumnSumsKernel(const float* x, int64_t rows, int64_t cols,
                                 float* out) {
  __shared__ double slots[kRowLanes][kColumnTile];
  for (int64_t tile = blockIdx.x; tile * kColumnTile < cols;
       tile += gridDim.x) {
    const int64_t col = tile * kColumnTile + threadIdx.x;
    double acc = 0;
    if (col < cols) {
      for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
        acc += x[r * cols + col];
      }
    }
    __syncthreads();  // the previous tile's sums are read
    slots[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      double total = 0;
      for (int y = 0; y < kRowLanes; ++y) total += slots[y][threadIdx.x];
      out[col] = static_cast<float>(total);
    }
  }
}

// One block per row (looping when rows exceed the grid).
__global__ void RowSumsKernel(const float* x, int64_t rows, int64_t cols,
                              float* out) {
  __shared__ double slots[kThreads / kWarpSize];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* r = x + row * cols;
    double acc = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) acc += r[j];
    acc = BlockReduce<kThreads>(acc, AddOp(), slots);
    if (threadIdx.x == 0) out[row] = static_cast<float>(acc);
  }
}

int GridFor(int64_t units) {
  if (units < 1) return 1;
  return static_cast<int>(units < kMaxBlocks ? units : kMaxBlocks);
}

}  // namespace

void LaunchReducePartials(ReduceOp op, const float* x, int64_t n,
                          double* partials, int blocks, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
      PartialsKernel<ReduceOp::kSum>
          <<<blocks, kThreads, 0, stream>>>(x, n, partials);
      break;
    case ReduceOp::kSumSquares:
      PartialsKernel<ReduceOp::kSumSquares>
          <<<blocks, kThreads, 0, stream>>>(x, n, partials);
      break;
    case ReduceOp::kMaxAbs:
      PartialsKernel<ReduceOp::kMaxAbs>
          <<<blocks, kThreads, 0, stream>>>(x, n, partials);
      break;
  }
}

void LaunchReduceFinish(ReduceOp op, const double* partials, int blocks,
                        float* out, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
      FinishKernel<ReduceOp::kSum>
          <<<1, kThreads, 0, stream>>>(partials, blocks, out);
      break;
    case ReduceOp::kSumSquares:
      FinishKernel<ReduceOp::kSumSquares>
          <<<1, kThreads, 0, stream>>>(partials, blocks, out);
      break;
    case ReduceOp::kMaxAbs:
      FinishKernel<ReduceOp::kMaxAbs>
          <<<1, kThreads, 0, stream>>>(partials, blocks, out);
      break;
  }
}

void LaunchColumnSums(const float* x, int64_t rows, int64_t cols, float* out,
                      cudaStream_t stream) {
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  ColumnSumsKernel<<<GridFor(tiles), dim3(kColumnTile, kRowLanes), 0, stream>>>(
      x, rows, cols, out);
}

void LaunchRowSums(const float* x, int64_t rows, int64_t cols, float* out,
                   cudaStream_t stream) {
  RowSumsKernel<<<GridFor(rows), kThreads, 0, stream>>>(x, rows, cols, out);
}

}  // namespace cuda_internal
}  // namespace cohort
