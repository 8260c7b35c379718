// Kernels of kernels/cuda/softmax.h, behind the plain-C++ launch functions
// of kernels/cuda/softmax_launch.h. Two forms: where the axis is the
// contiguous one (inner = 1, dense rows) a warp takes a row and reduces with
// shuffles; otherwise a thread takes one (outer, inner) column and walks
// the axis, adjacent threads reading adjacent positions. Grid-stride loops
// over 64-bit indices.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/softmax_launch.h"

namespace cohort {
namespace gpu {
namespace softmax_internal {
namespace {

constexpr int kWarp = 32;

// Every lane of the warp gets the warp's maximum / sum, combined in a
// fixed tree order.
__device__ float WarpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}
__device__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// One warp per row of `axis` contiguous floats.
__global__ void RowForwardKernel(SoftmaxArgs a, const float* in, float* out) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kThreads / kWarp;
  for (int64_t r = FirstIndex() / kWarp; r < a.outer; r += warps) {
    const float* x = in + r * a.axis;
    float* y = out + r * a.axis;
    float mx = -INFINITY;
    for (int64_t j = lane; j < a.axis; j += kWarp) mx = fmaxf(mx, x[j]);
    mx = WarpMax(mx);
    float sum = 0;
    for (int64_t j = lane; j < a.axis; j += kWarp) sum += expf(x[j] - mx);
    const float inv = 1.0f / WarpSum(sum);
    for (int64_t j = lane; j < a.axis; j += kWarp) {
      y[j] = expf(x[j] - mx) * inv;
    }
  }
}

__global__ void RowBackwardKernel(SoftmaxArgs a, const float* in,
                                  const float* dy, float* dx) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kThreads / kWarp;
  for (int64_t r = FirstIndex() / kWarp; r < a.outer; r += warps) {
    const float* x = in + r * a.axis;
    const float* g = dy + r * a.axis;
    float mx = -INFINITY;
    for (int64_t j = lane; j < a.axis; j += kWarp) mx = fmaxf(mx, x[j]);
    mx = WarpMax(mx);
    float sum = 0, dot = 0;
    for (int64_t j = lane; j < a.axis; j += kWarp) {
      const float e = expf(x[j] - mx);
      sum += e;
      dot += g[j] * e;
    }
    const float inv = 1.0f / WarpSum(sum);
    dot = WarpSum(dot) * inv;
    for (int64_t j = lane; j < a.axis; j += kWarp) {
      const float y = expf(x[j] - mx) * inv;
      dx[r * a.axis + j] = y * (g[j] - dot);
    }
  }
}

// One thread per (outer, inner) column, the axis `inner` floats apart.
__global__ void ColumnForwardKernel(SoftmaxArgs a, const float* in,
                                    float* out) {
  const int64_t n = a.outer * a.inner;
  for (int64_t c = FirstIndex(); c < n; c += GridStride()) {
    const int64_t at = c / a.inner * a.axis * a.inner + c % a.inner;
    const float* x = in + at;
    float* y = out + at;
    float mx = x[0];
    for (int64_t k = 1; k < a.axis; ++k) mx = fmaxf(mx, x[k * a.inner]);
    float sum = 0;
    for (int64_t k = 0; k < a.axis; ++k) sum += expf(x[k * a.inner] - mx);
    const float inv = 1.0f / sum;
    for (int64_t k = 0; k < a.axis; ++k) {
      y[k * a.inner] = expf(x[k * a.inner] - mx) * inv;
    }
  }
}

__global__ void ColumnBackwardKernel(SoftmaxArgs a, const float* in,
                                     const float* dy, float* dx) {
  const int64_t n = a.outer * a.inner;
  for (int64_t c = FirstIndex(); c < n; c += GridStride()) {
    const int64_t at = c / a.inner * a.axis * a.inner + c % a.inner;
    const float* x = in + at;
    const float* g = dy + at;
    float mx = x[0];
    for (int64_t k = 1; k < a.axis; ++k) mx = fmaxf(mx, x[k * a.inner]);
    float sum = 0, dot = 0;
    for (int64_t k = 0; k < a.axis; ++k) {
      const float e = expf(x[k * a.inner] - mx);
      sum += e;
      dot += g[k * a.inner] * e;
    }
    const float inv = 1.0f / sum;
    dot *= inv;
    for (int64_t k = 0; k < a.axis; ++k) {
      const float y = expf(x[k * a.inner] - mx) * inv;
      dx[at + k * a.inner] = y * (g[k * a.inner] - dot);
    }
  }
}

}  // namespace

void LaunchSoftmaxForward(const SoftmaxArgs& a, const float* in, float* out,
                          cudaStream_t stream) {
  if (a.inner == 1) {
    RowForwardKernel<<<Blocks(a.outer * kWarp), kThreads, 0, stream>>>(a, in,
                                                                       out);
    return;
  }
  ColumnForwardKernel<<<Blocks(a.outer * a.inner), kThreads, 0, stream>>>(a, in,
                                                                          out);
}

void LaunchSoftmaxBackward(const SoftmaxArgs& a, const float* in,
                           const float* grad_out, float* grad_in,
                           cudaStream_t stream) {
  if (a.inner == 1) {
    RowBackwardKernel<<<Blocks(a.outer * kWarp), kThreads, 0, stream>>>(
        a, in, grad_out, grad_in);
    return;
  }
  ColumnBackwardKernel<<<Blocks(a.outer * a.inner), kThreads, 0, stream>>>(
      a, in, grad_out, grad_in);
}

}  // namespace softmax_internal
}  // namespace gpu
}  // namespace cohort
