// Kernels of kernels/cuda/layer_ops.h, behind the plain-C++ launch functions
// of kernels/cuda/layer_ops_launch.h.
//
// Elementwise kernels are grid-stride loops over 64-bit indices. Reductions
// (normalisation statistics, parameter gradients) run one block per row or
// per parameter, sum in double and combine the threads' partial sums in a
// fixed tree order, so every run gives the same bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/layer_ops_launch.h"

namespace cohort {
namespace gpu {
namespace layer_ops_internal {
namespace {

// ActivationKind's order (kernels/activations.h).
enum Kind {
  kGelu,
  kGeluTanh,
  kSilu,
  kTanh,
  kSigmoid,
  kLeakyRelu,
  kRelu6,
  kHardsigmoid,
  kHardswish
};

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kGeluCubic = 0.044715f;

__device__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ float Relu6(float x) { return fminf(fmaxf(x, 0.0f), 6.0f); }

__device__ float Forward(int kind, float slope, float x) {
  switch (kind) {
    case kGelu:
      return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    case kGeluTanh:
      return 0.5f * x *
             (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
    case kSilu:
      return x * Sigmoid(x);
    case kTanh:
      return tanhf(x);
    case kSigmoid:
      return Sigmoid(x);
    case kRelu6:
      return Relu6(x);
    case kHardsigmoid:
      return Relu6(x + 3.0f) / 6.0f;
    case kHardswish:
      return x * Relu6(x + 3.0f) / 6.0f;
    default:
      return x > 0.0f ? x : slope * x;
  }
}

__device__ float Derivative(int kind, float slope, float x) {
  switch (kind) {
    case kGelu:
      return 0.5f * (1.0f + erff(x * kInvSqrt2)) +
             x * kInvSqrt2Pi * expf(-0.5f * x * x);
    case kGeluTanh: {
      const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    }
    case kSilu: {
      const float s = Sigmoid(x);
      return s * (1.0f + x * (1.0f - s));
    }
    case kTanh: {
      const float t = tanhf(x);
      return 1.0f - t * t;
    }
    case kSigmoid: {
      const float s = Sigmoid(x);
      return s * (1.0f - s);
    }
    // PyTorch's subgradients (kernels/activations.cc).
    case kRelu6:
      return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case kHardsigmoid:
      return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
    case kHardswish:
      return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
    default:
      return x > 0.0f ? 1.0f : slope;
  }
}

// The kind is uniform over the grid, so the switch does not diverge.
__global__ void ActivationForwardKernel(int kind, float slope, const float* in,
                                        float* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = Forward(kind, slope, in[i]);
  }
}

__global__ void ActivationBackwardKernel(int kind, float slope, const float* in,
                                         const float* dy, float* dx,
                                         int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    dx[i] = dy[i] * Derivative(kind, slope, in[i]);
  }
}

// The block's sum of `v` (every thread gets it); kThreads threads.
__device__ double BlockSum(double v, double* partial) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();  // partial[0] is read before the next call overwrites it
  return total;
}

// The affine index of element j of row r.
__device__ int64_t AffineIndex(const NormArgs& a, int64_t r, int64_t j) {
  if (a.per_element) return j;  // LayerNorm: one group, the row is the sample
  const int64_t channels_per_group = a.row_size / a.inner;
  return (r % a.groups) * channels_per_group + j / a.inner;
}

__global__ void NormForwardKernel(NormArgs a, float eps, const float* x,
                                  const float* weight, const float* bias,
                                  float* y, float* mean_out,
                                  float* invstd_out) {
  __shared__ double partial[kThreads];
  const double m = static_cast<double>(a.row_size);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const float* xr = x + r * a.row_size;
    float* yr = y + r * a.row_size;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < a.row_size; j += blockDim.x) sum += xr[j];
    const double mean = BlockSum(sum, partial) / m;
    double var = 0;
    for (int64_t j = threadIdx.x; j < a.row_size; j += blockDim.x) {
      const double d = xr[j] - mean;
      var += d * d;
    }
    const double invstd = 1.0 / sqrt(BlockSum(var, partial) / m + eps);
    if (threadIdx.x == 0) {
      mean_out[r] = static_cast<float>(mean);
      invstd_out[r] = static_cast<float>(invstd);
    }
    const float fm = static_cast<float>(mean);
    const float fi = static_cast<float>(invstd);
    for (int64_t j = threadIdx.x; j < a.row_size; j += blockDim.x) {
      const float xh = (xr[j] - fm) * fi;
      if (weight == nullptr) {
        yr[j] = xh;
      } else {
        const int64_t k = AffineIndex(a, r, j);
        yr[j] = xh * weight[k] + bias[k];
      }
    }
  }
}

__global__ void NormInputGradKernel(NormArgs a, const float* x, const float* dy,
                                    const float* weight, const float* mean,
                                    const float* invstd, float* dx) {
  __shared__ double partial[kThreads];
  const double inv_m = 1.0 / static_cast<double>(a.row_size);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const float* xr = x + r * a.row_size;
    const float* dr = dy + r * a.row_size;
    const double mu = mean[r], is = invstd[r];
    double s1 = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < a.row_size; j += blockDim.x) {
      const double w = weight == nullptr ? 1.0 : weight[AffineIndex(a, r, j)];
      const double gy = dr[j] * w;
      s1 += gy;
      s2 += gy * (xr[j] - mu) * is;
    }
    const double mean_gy = BlockSum(s1, partial) * inv_m;
    const double mean_gy_xh = BlockSum(s2, partial) * inv_m;
    for (int64_t j = threadIdx.x; j < a.row_size; j += blockDim.x) {
      const double w = weight == nullptr ? 1.0 : weight[AffineIndex(a, r, j)];
      const double xh = (xr[j] - mu) * is;
      dx[r * a.row_size + j] =
          static_cast<float>(is * (dr[j] * w - mean_gy - xh * mean_gy_xh));
    }
  }
}

// LayerNorm's parameter gradients: one thread per element of the sample,
// summing over the rows (samples) in order.
__global__ void NormElementParamGradKernel(NormArgs a, const float* x,
                                           const float* dy, const float* mean,
                                           const float* invstd,
                                           float* weight_grad,
                                           float* bias_grad) {
  for (int64_t j = FirstIndex(); j < a.row_size; j += GridStride()) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < a.rows; ++r) {
      const float d = dy[r * a.row_size + j];
      sw += static_cast<double>(d) * (x[r * a.row_size + j] - mean[r]) *
            invstd[r];
      sb += d;
    }
    weight_grad[j] = static_cast<float>(sw);
    bias_grad[j] = static_cast<float>(sb);
  }
}

// GroupNorm's parameter gradients: one block per channel, over the
// samples and the channel's positions.
__global__ void NormChannelParamGradKernel(NormArgs a, int64_t channels,
                                           const float* x, const float* dy,
                                           const float* mean,
                                           const float* invstd,
                                           float* weight_grad,
                                           float* bias_grad) {
  __shared__ double partial[kThreads];
  const int64_t per_group = channels / a.groups;
  const int64_t samples = a.rows / a.groups;
  const int64_t count = samples * a.inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const int64_t n = i / a.inner, p = i % a.inner;
      const int64_t at = (n * channels + c) * a.inner + p;
      const int64_t row = n * a.groups + c / per_group;
      sw += static_cast<double>(dy[at]) * (x[at] - mean[row]) * invstd[row];
      sb += dy[at];
    }
    const double w = BlockSum(sw, partial);
    const double b = BlockSum(sb, partial);
    if (threadIdx.x == 0) {
      weight_grad[c] = static_cast<float>(w);
      bias_grad[c] = static_cast<float>(b);
    }
  }
}

__device__ void Window(const Pool1dArgs& a, int64_t o, int64_t* b, int64_t* e) {
  const int64_t start = o * a.stride - a.padding;
  *b = start < 0 ? 0 : start;
  *e = start + a.kernel < a.in_l ? start + a.kernel : a.in_l;
}

__global__ void MaxPool1dForwardKernel(Pool1dArgs a, const float* in,
                                       float* out, int32_t* argmax) {
  const int64_t n = a.planes * a.out_l;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t p = i / a.out_l, o = i % a.out_l;
    const float* row = in + p * a.in_l;
    int64_t b, e;
    Window(a, o, &b, &e);
    float best = row[b];
    int64_t at = b;
    for (int64_t l = b + 1; l < e; ++l) {
      if (row[l] > best) best = row[l], at = l;
    }
    out[i] = best;
    argmax[i] = static_cast<int32_t>(at);
  }
}

// The outputs whose windows cover input position l: o in [first, last].
__device__ void Covering(const Pool1dArgs& a, int64_t l, int64_t* first,
                         int64_t* last) {
  const int64_t hi = l + a.padding;      // o * stride <= hi
  const int64_t lo = hi - a.kernel + 1;  // o * stride >= lo
  *first = lo <= 0 ? 0 : (lo + a.stride - 1) / a.stride;
  *last = hi / a.stride;
  if (*last > a.out_l - 1) *last = a.out_l - 1;
}

// One thread per input element, gathering from the outputs that cover it
// (in order), so no atomics are needed.
__global__ void MaxPool1dBackwardKernel(Pool1dArgs a, const float* dy,
                                        const int32_t* argmax, float* dx) {
  const int64_t n = a.planes * a.in_l;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t p = i / a.in_l, l = i % a.in_l;
    int64_t first, last;
    Covering(a, l, &first, &last);
    float sum = 0;
    for (int64_t o = first; o <= last; ++o) {
      if (argmax[p * a.out_l + o] == l) sum += dy[p * a.out_l + o];
    }
    dx[i] = sum;
  }
}

__global__ void AvgPool1dForwardKernel(Pool1dArgs a, const float* in,
                                       float* out) {
  const int64_t n = a.planes * a.out_l;
  const float inv = 1.0f / static_cast<float>(a.kernel);
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t p = i / a.out_l, o = i % a.out_l;
    const float* row = in + p * a.in_l;
    int64_t b, e;
    Window(a, o, &b, &e);
    float sum = 0;
    for (int64_t l = b; l < e; ++l) sum += row[l];
    out[i] = sum * inv;
  }
}

__global__ void AvgPool1dBackwardKernel(Pool1dArgs a, const float* dy,
                                        float* dx) {
  const int64_t n = a.planes * a.in_l;
  const float inv = 1.0f / static_cast<float>(a.kernel);
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t p = i / a.in_l, l = i % a.in_l;
    int64_t first, last;
    Covering(a, l, &first, &last);
    float sum = 0;
    for (int64_t o = first; o <= last; ++o) sum += dy[p * a.out_l + o] * inv;
    dx[i] = sum;
  }
}

unsigned int RowBlocks(int64_t rows) {
  return static_cast<unsigned int>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

}  // namespace

void LaunchActivationForward(int kind, float slope, const float* in, float* out,
                             int64_t n, cudaStream_t stream) {
  ActivationForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(kind, slope, in,
                                                              out, n);
}

void LaunchActivationBackward(int kind, float slope, const float* in,
                              const float* grad_out, float* grad_in, int64_t n,
                              cudaStream_t stream) {
  ActivationBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(
      kind, slope, in, grad_out, grad_in, n);
}

void LaunchNormForward(const NormArgs& a, float eps, const float* x,
                       const float* weight, const float* bias, float* y,
                       float* mean, float* invstd, cudaStream_t stream) {
  NormForwardKernel<<<RowBlocks(a.rows), kThreads, 0, stream>>>(
      a, eps, x, weight, bias, y, mean, invstd);
}

void LaunchNormBackward(const NormArgs& a, const float* x, const float* dy,
                        const float* weight, const float* mean,
                        const float* invstd, float* dx, float* weight_grad,
                        float* bias_grad, cudaStream_t stream) {
  if (dx != nullptr) {
    NormInputGradKernel<<<RowBlocks(a.rows), kThreads, 0, stream>>>(
        a, x, dy, weight, mean, invstd, dx);
  }
  if (weight == nullptr) return;
  if (a.per_element) {
    NormElementParamGradKernel<<<Blocks(a.row_size), kThreads, 0, stream>>>(
        a, x, dy, mean, invstd, weight_grad, bias_grad);
  } else {
    const int64_t channels = a.groups * (a.row_size / a.inner);
    NormChannelParamGradKernel<<<RowBlocks(channels), kThreads, 0, stream>>>(
        a, channels, x, dy, mean, invstd, weight_grad, bias_grad);
  }
}

void LaunchMaxPool1dForward(const Pool1dArgs& a, const float* in, float* out,
                            int32_t* argmax, cudaStream_t stream) {
  MaxPool1dForwardKernel<<<Blocks(a.planes * a.out_l), kThreads, 0, stream>>>(
      a, in, out, argmax);
}

void LaunchMaxPool1dBackward(const Pool1dArgs& a, const float* grad_out,
                             const int32_t* argmax, float* grad_in,
                             cudaStream_t stream) {
  MaxPool1dBackwardKernel<<<Blocks(a.planes * a.in_l), kThreads, 0, stream>>>(
      a, grad_out, argmax, grad_in);
}

void LaunchAvgPool1dForward(const Pool1dArgs& a, const float* in, float* out,
                            cudaStream_t stream) {
  AvgPool1dForwardKernel<<<Blocks(a.planes * a.out_l), kThreads, 0, stream>>>(
      a, in, out);
}

void LaunchAvgPool1dBackward(const Pool1dArgs& a, const float* grad_out,
                             float* grad_in, cudaStream_t stream) {
  AvgPool1dBackwardKernel<<<Blocks(a.planes * a.in_l), kThreads, 0, stream>>>(
      a, grad_out, grad_in);
}

}  // namespace layer_ops_internal
}  // namespace gpu
}  // namespace cohort
