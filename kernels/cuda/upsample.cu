// Kernels of kernels/cuda/upsample.h, behind the plain-C++ launch functions
// of kernels/cuda/upsample_launch.h: grid-stride loops over 64-bit indices,
// one thread per output (forward) or per input (backward, gathering from
// the outputs that read it).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/upsample_launch.h"
#include "kernels/upsample.h"

namespace cohort {
namespace gpu {
namespace upsample_internal {
namespace {

__global__ void ForwardKernel(UpsampleArgs a, const float* in, float* out) {
  const int64_t out_h = a.in_h * a.scale, out_w = a.in_w * a.scale;
  const int64_t out_plane = out_h * out_w;
  const int64_t n = a.planes * out_plane;
  for (int64_t o = FirstIndex(); o < n; o += GridStride()) {
    const int64_t p = o / out_plane, i = o % out_plane / out_w, j = o % out_w;
    const float* src = in + p * a.in_h * a.in_w;
    if (!a.bilinear) {
      out[o] = src[i / a.scale * a.in_w + j / a.scale];
      continue;
    }
    const LinearTap<float> r = BilinearTap<float>(i, a.in_h, a.scale);
    const LinearTap<float> c = BilinearTap<float>(j, a.in_w, a.scale);
    const float* r0 = src + r.i0 * a.in_w;
    const float* r1 = src + r.i1 * a.in_w;
    const float top = (1.0f - c.w1) * r0[c.i0] + c.w1 * r0[c.i1];
    const float bottom = (1.0f - c.w1) * r1[c.i0] + c.w1 * r1[c.i1];
    out[o] = (1.0f - r.w1) * top + r.w1 * bottom;
  }
}

// The weight by which output index `i` of an axis reads input index `x`
// (0 when it does not; both taps count where they coincide, at the edge).
__device__ float TapWeight(int64_t i, int64_t x, int64_t in, int64_t scale) {
  const LinearTap<float> t = BilinearTap<float>(i, in, scale);
  return (t.i0 == x ? 1.0f - t.w1 : 0.0f) + (t.i1 == x ? t.w1 : 0.0f);
}

// Output index i reads inputs within one of (i + 0.5) / k - 0.5, so input
// x is read only by outputs in [(x - 1) k, (x + 2) k).
__global__ void BilinearBackwardKernel(UpsampleArgs a, const float* dy,
                                       float* dx) {
  const int64_t out_h = a.in_h * a.scale, out_w = a.in_w * a.scale;
  const int64_t in_plane = a.in_h * a.in_w;
  const int64_t n = a.planes * in_plane;
  for (int64_t x = FirstIndex(); x < n; x += GridStride()) {
    const int64_t p = x / in_plane, h = x % in_plane / a.in_w, w = x % a.in_w;
    const float* g = dy + p * out_h * out_w;
    const int64_t i0 = h > 0 ? (h - 1) * a.scale : 0;
    const int64_t i1 = min((h + 2) * a.scale, out_h);
    const int64_t j0 = w > 0 ? (w - 1) * a.scale : 0;
    const int64_t j1 = min((w + 2) * a.scale, out_w);
    float sum = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const float wr = TapWeight(i, h, a.in_h, a.scale);
      if (wr == 0.0f) continue;
      float row = 0;
      for (int64_t j = j0; j < j1; ++j) {
        row += TapWeight(j, w, a.in_w, a.scale) * g[i * out_w + j];
      }
      sum += wr * row;
    }
    dx[x] = sum;
  }
}

// Each input's k x k block of outputs.
__global__ void NearestBackwardKernel(UpsampleArgs a, const float* dy,
                                      float* dx) {
  const int64_t out_w = a.in_w * a.scale;
  const int64_t in_plane = a.in_h * a.in_w;
  const int64_t n = a.planes * in_plane;
  for (int64_t x = FirstIndex(); x < n; x += GridStride()) {
    const int64_t p = x / in_plane, h = x % in_plane / a.in_w, w = x % a.in_w;
    const float* g = dy + p * in_plane * a.scale * a.scale +
                     h * a.scale * out_w + w * a.scale;
    float sum = 0;
    for (int64_t r = 0; r < a.scale; ++r) {
      for (int64_t s = 0; s < a.scale; ++s) sum += g[r * out_w + s];
    }
    dx[x] = sum;
  }
}

}  // namespace

void LaunchUpsampleForward(const UpsampleArgs& a, const float* in, float* out,
                           cudaStream_t stream) {
  const int64_t n = a.planes * a.in_h * a.in_w * a.scale * a.scale;
  ForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(a, in, out);
}

void LaunchUpsampleBackward(const UpsampleArgs& a, const float* grad_out,
                            float* grad_in, cudaStream_t stream) {
  const int64_t n = a.planes * a.in_h * a.in_w;
  if (a.bilinear) {
    BilinearBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(a, grad_out,
                                                               grad_in);
  } else {
    NearestBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(a, grad_out,
                                                              grad_in);
  }
}

}  // namespace upsample_internal
}  // namespace gpu
}  // namespace cohort
