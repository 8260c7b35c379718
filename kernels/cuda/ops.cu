// Kernels of kernels/cuda/ops.h, behind the plain-C++ launch functions of
// kernels/cuda/ops_launch.h.
//
// Every elementwise kernel is a grid-stride loop over 64-bit indices, so
// any n works with a capped grid. Arithmetic that must match the CPU engine
// uses explicit IEEE intrinsics (__fmul_rn, __fadd_rn, __fdiv_rn,
// __fsqrt_rn, fmaf): nvcc may then neither fuse nor reorder them, and each
// kernel performs exactly the operations of the CPU code it mirrors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/dropout_rng.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/ops_launch.h"

namespace cohort {
namespace gpu {
namespace ops_internal {
namespace {

// ---------------------------------------------------------------- optimizers

// The float AVX2 loop of kernels/update_rules.cc, one element per
// iteration: g = fma(wd, p, grad); b = fma(mu, b, g);
// d = nesterov ? fma(mu, b, g) : b; p = fma(-lr, d, p).
template <bool kMomentum, bool kNesterov>
__global__ void SgdKernel(float* p, const float* g, float* b, int64_t n,
                          float lr, float wd, float mu) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float pi = p[i];
    const float gi = fmaf(wd, pi, g[i]);
    if (!kMomentum) {
      p[i] = fmaf(-lr, gi, pi);
      continue;
    }
    const float bi = fmaf(mu, b[i], gi);
    b[i] = bi;
    const float d = kNesterov ? fmaf(mu, bi, gi) : bi;
    p[i] = fmaf(-lr, d, pi);
  }
}

// The float AVX2 loop of AdamKernel in kernels/update_rules.cc.
__global__ void AdamKernel(float* p, const float* g, float* m, float* v,
                           int64_t n, AdamScalars s) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float pi = p[i];
    const float gi = fmaf(s.l2, pi, g[i]);
    const float mi = fmaf(s.lerp1, __fsub_rn(gi, m[i]), m[i]);
    const float vi =
        fmaf(s.one_minus_beta2, __fmul_rn(gi, gi), __fmul_rn(s.beta2, v[i]));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
    p[i] = fmaf(-s.step_size, __fdiv_rn(mi, denom), __fmul_rn(pi, s.decay));
  }
}

// RmspropKernel of kernels/update_rules.cc.
__global__ void RmspropKernel(float* p, const float* g, float* sq, float* b,
                              float* a, int64_t n, float lr, float wd,
                              float alpha, float eps, float mu) {
  const float one_minus_alpha = __fsub_rn(1.0f, alpha);
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float pi = p[i];
    const float gi = fmaf(wd, pi, g[i]);
    const float si =
        fmaf(one_minus_alpha, __fmul_rn(gi, gi), __fmul_rn(sq[i], alpha));
    sq[i] = si;
    float avg;
    if (a != nullptr) {
      const float ai = fmaf(one_minus_alpha, gi, __fmul_rn(a[i], alpha));
      a[i] = ai;
      avg = __fadd_rn(__fsqrt_rn(fmaf(-ai, ai, si)), eps);
    } else {
      avg = __fadd_rn(__fsqrt_rn(si), eps);
    }
    const float d = __fdiv_rn(gi, avg);
    if (b != nullptr) {
      const float bi = fmaf(mu, b[i], d);
      b[i] = bi;
      p[i] = fmaf(-lr, bi, pi);
    } else {
      p[i] = fmaf(-lr, d, pi);
    }
  }
}

// The sum of every thread's x over the block, in a fixed tree (so the same
// inputs always give the same sum); every thread gets it.
__device__ double BlockSum(double x) {
  __shared__ double partial[kThreads];
  __syncthreads();  // a previous call's readers are done
  partial[threadIdx.x] = x;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      partial[threadIdx.x] += partial[threadIdx.x + half];
    }
    __syncthreads();
  }
  return partial[0];
}

// LAMB's update u of element i (m and v already advanced).
__device__ float LambUpdate(float p, float m, float v, const LambScalars& s,
                            float wd) {
  return fmaf(
      wd, p,
      __fdiv_rn(__fmul_rn(m, s.inv_bc1),
                __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2_sqrt), s.eps)));
}

// One block per piece (striding over pieces): m, v, and the piece's
// ||p||^2 and ||u||^2.
__global__ void LambSumsKernel(const float* p, const float* g, float* m,
                               float* v, LambScalars s, Pieces t) {
  for (int64_t k = blockIdx.x; k < t.num_pieces; k += gridDim.x) {
    const int64_t begin = t.pieces[4 * k], end = t.pieces[4 * k + 1];
    const float wd = t.pieces[4 * k + 3] != 0 ? s.weight_decay : 0.0f;
    double pp = 0, uu = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float gi = g[i];
      const float mi = fmaf(s.one_minus_beta1, gi, __fmul_rn(s.beta1, m[i]));
      const float vi =
          fmaf(s.one_minus_beta2, __fmul_rn(gi, gi), __fmul_rn(s.beta2, v[i]));
      m[i] = mi;
      v[i] = vi;
      const float u = LambUpdate(p[i], mi, vi, s, wd);
      pp += static_cast<double>(p[i]) * p[i];
      uu += static_cast<double>(u) * u;
    }
    pp = BlockSum(pp);
    uu = BlockSum(uu);
    if (threadIdx.x == 0) {
      t.sums[2 * k] = pp;
      t.sums[2 * k + 1] = uu;
    }
  }
}

// One thread per tensor: its pieces' sums, in order.
__global__ void FoldKernel(Pieces t) {
  for (int64_t k = FirstIndex(); k < t.num_tensors; k += GridStride()) {
    double a = 0, b = 0;
    for (int64_t q = t.tensor_pieces[k]; q < t.tensor_pieces[k + 1]; ++q) {
      a += t.sums[2 * q];
      b += t.sums[2 * q + 1];
    }
    t.totals[2 * k] = a;
    t.totals[2 * k + 1] = b;
  }
}

__device__ double Ratio(double num, double den, bool zero) {
  return zero || den == 0 ? 1.0 : num / den;
}

__global__ void LambApplyKernel(float* p, const float* m, const float* v,
                                LambScalars s, float lr, Pieces t) {
  for (int64_t k = blockIdx.x; k < t.num_pieces; k += gridDim.x) {
    const int64_t begin = t.pieces[4 * k], end = t.pieces[4 * k + 1];
    const int64_t tensor = t.pieces[4 * k + 2];
    const float wd = t.pieces[4 * k + 3] != 0 ? s.weight_decay : 0.0f;
    const double p2 = t.totals[2 * tensor], u2 = t.totals[2 * tensor + 1];
    const float step =
        static_cast<float>(lr * Ratio(sqrt(p2), sqrt(u2), p2 == 0 || u2 == 0));
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float pi = p[i];
      p[i] = fmaf(-step, LambUpdate(pi, m[i], v[i], s, wd), pi);
    }
  }
}

__global__ void LarsSumsKernel(const float* p, const float* g, Pieces t) {
  for (int64_t k = blockIdx.x; k < t.num_pieces; k += gridDim.x) {
    const int64_t begin = t.pieces[4 * k], end = t.pieces[4 * k + 1];
    double pp = 0, gg = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      pp += static_cast<double>(p[i]) * p[i];
      gg += static_cast<double>(g[i]) * g[i];
    }
    pp = BlockSum(pp);
    gg = BlockSum(gg);
    if (threadIdx.x == 0) {
      t.sums[2 * k] = pp;
      t.sums[2 * k + 1] = gg;
    }
  }
}

__global__ void LarsApplyKernel(float* p, const float* g, float* b,
                                LarsScalars s, double lr, Pieces t) {
  for (int64_t k = blockIdx.x; k < t.num_pieces; k += gridDim.x) {
    const int64_t begin = t.pieces[4 * k], end = t.pieces[4 * k + 1];
    const int64_t tensor = t.pieces[4 * k + 2];
    const double wd = t.pieces[4 * k + 3] != 0 ? s.weight_decay : 0.0;
    const double pn = sqrt(t.totals[2 * tensor]);
    const double gn = sqrt(t.totals[2 * tensor + 1]);
    const float local = static_cast<float>(
        Ratio(s.trust_coefficient * pn, gn + wd * pn, pn == 0 || gn == 0));
    const float wdf = static_cast<float>(wd), rate = static_cast<float>(lr);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float pi = p[i];
      const float d = __fmul_rn(local, fmaf(wdf, pi, g[i]));
      if (b == nullptr) {
        p[i] = fmaf(-rate, d, pi);
        continue;
      }
      const float bi = fmaf(s.momentum, b[i], d);
      b[i] = bi;
      p[i] = fmaf(-rate, bi, pi);
    }
  }
}

unsigned int PieceBlocks(int64_t pieces) {
  return static_cast<unsigned int>(pieces < kMaxBlocks ? pieces : kMaxBlocks);
}

// ------------------------------------------------------ gradient averaging

__global__ void ScaleKernel(float* y, int64_t n, float scale) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    y[i] = __fmul_rn(y[i], scale);
  }
}

// Each element reads all its inputs before writing `out`, so `out` may be
// one of the inputs.
__global__ void SumKernel(SumInputs in, bool accumulate, float scale,
                          float* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    float s = accumulate ? out[i] : in.ptr[0][i];
    for (int k = accumulate ? 0 : 1; k < in.count; ++k) {
      s = __fadd_rn(s, in.ptr[k][i]);
    }
    out[i] = __fmul_rn(s, scale);
  }
}

// ----------------------------------------------------- bias + activation

// The values of ops.h's BiasLayout::kPerRow (kPerColumn is 0) and
// Activation::kRelu (kIdentity is 0).
constexpr int kPerRow = 1;
constexpr int kRelu = 1;

// CPU ReluForward: x > 0 ? x : 0 (NaN and -0 give +0).
__device__ float Activate(int activation, float x) {
  if (activation == kRelu) return x > 0.0f ? x : 0.0f;
  return x;
}

// CPU ReluBackward, with the forward output in place of its input (same
// sign pattern): dy where y > 0, else 0.
__device__ float ActivationGrad(int activation, float y, float dy) {
  if (activation == kRelu) return y > 0.0f ? dy : 0.0f;
  return dy;
}

__global__ void BiasActivationForwardKernel(const float* x, const float* bias,
                                            int64_t cols, int64_t n, int layout,
                                            int activation, float* y) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    float value = x[i];
    if (bias != nullptr) {
      value = __fadd_rn(value, bias[layout == kPerRow ? i / cols : i % cols]);
    }
    y[i] = Activate(activation, value);
  }
}

// dx only (no bias gradient wanted).
__global__ void ActivationBackwardKernel(const float* y, const float* dy,
                                         int64_t n, int activation, float* dx) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    dx[i] = ActivationGrad(activation, y[i], dy[i]);
  }
}

// kPerRow backward: one block per row (rows grid-strided; the row loop is
// uniform across the block, so the barriers are safe). Threads stride over
// the row's columns, write dx and sum it in double; a shared-memory tree
// then sums the threads' partials in a fixed order (deterministic).
__global__ void RowBiasBackwardKernel(const float* y, const float* dy,
                                      int64_t rows, int64_t cols,
                                      int activation, float* dx,
                                      float* bias_grad) {
  __shared__ double partial[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    double sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = ActivationGrad(activation, y[base + c], dy[base + c]);
      dx[base + c] = g;
      sum += g;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    // Launched with exactly kThreads threads (a power of two).
    for (unsigned int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        partial[threadIdx.x] += partial[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) bias_grad[r] = static_cast<float>(partial[0]);
    __syncthreads();  // partial[0] is read before the next row overwrites it
  }
}

// kPerColumn backward: a block covers kColumnTile adjacent columns (a warp
// reads a row's columns contiguously) with kRowLanes threads per column
// striding over the rows; the kRowLanes partial sums of a column are then
// added in lane order by one thread (deterministic). Column tiles are
// grid-strided, uniformly across the block.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = kThreads / kColumnTile;  // 8

__global__ void ColumnBiasBackwardKernel(const float* y, const float* dy,
                                         int64_t rows, int64_t cols,
                                         int activation, float* dx,
                                         float* bias_grad) {
  __shared__ double partial[kRowLanes][kColumnTile];
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * kColumnTile; c0 < cols;
       c0 += static_cast<int64_t>(gridDim.x) * kColumnTile) {
    const int64_t c = c0 + threadIdx.x;
    double sum = 0;
    if (c < cols) {
      for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
        const int64_t i = r * cols + c;
        const float g = ActivationGrad(activation, y[i], dy[i]);
        dx[i] = g;
        sum += g;
      }
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      double total = 0;
      for (int lane = 0; lane < kRowLanes; ++lane) {
        total += partial[lane][threadIdx.x];
      }
      bias_grad[c] = static_cast<float>(total);
    }
    __syncthreads();  // partial is read before the next tile overwrites it
  }
}

// ------------------------------------------------------------------- casts

__global__ void FloatToBf16Kernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
  }
}

__global__ void Bf16ToFloatKernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
  }
}

__global__ void FloatToFp16Kernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = __half_as_ushort(__float2half_rn(in[i]));
  }
}

__global__ void Fp16ToFloatKernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = __half2float(__ushort_as_half(in[i]));
  }
}

// ----------------------------------------------------------------- dropout

// CPU MaskedScale: in * (scale * mask), with scale * 1 = scale and
// scale * 0 = 0 for the finite positive scale.
__global__ void DropoutKernel(const float* in, float* out, uint8_t* mask,
                              int64_t n, uint64_t threshold, float scale,
                              uint64_t seed, uint64_t offset) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const bool keep =
        DropoutKeep(seed, offset + static_cast<uint64_t>(i), threshold);
    out[i] = __fmul_rn(in[i], keep ? scale : 0.0f);
    if (mask != nullptr) mask[i] = keep ? 1 : 0;
  }
}

}  // namespace

void LaunchSgd(float* params, const float* grads, float* momentum_buffer,
               int64_t n, float lr, float weight_decay, float momentum,
               bool nesterov, cudaStream_t stream) {
  const unsigned int blocks = Blocks(n);
  if (momentum_buffer == nullptr) {
    SgdKernel<false, false><<<blocks, kThreads, 0, stream>>>(
        params, grads, nullptr, n, lr, weight_decay, momentum);
  } else if (nesterov) {
    SgdKernel<true, true><<<blocks, kThreads, 0, stream>>>(
        params, grads, momentum_buffer, n, lr, weight_decay, momentum);
  } else {
    SgdKernel<true, false><<<blocks, kThreads, 0, stream>>>(
        params, grads, momentum_buffer, n, lr, weight_decay, momentum);
  }
}

void LaunchAdam(float* params, const float* grads, float* m, float* v,
                int64_t n, const AdamScalars& s, cudaStream_t stream) {
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(params, grads, m, v, n, s);
}

void LaunchRmsprop(float* params, const float* grads, float* square_avg,
                   float* b, float* a, int64_t n, float lr, float wd,
                   float alpha, float eps, float momentum,
                   cudaStream_t stream) {
  RmspropKernel<<<Blocks(n), kThreads, 0, stream>>>(
      params, grads, square_avg, b, a, n, lr, wd, alpha, eps, momentum);
}

void LaunchLamb(float* params, const float* grads, float* m, float* v,
                const LambScalars& s, float lr, const Pieces& pieces,
                cudaStream_t stream) {
  const unsigned int blocks = PieceBlocks(pieces.num_pieces);
  LambSumsKernel<<<blocks, kThreads, 0, stream>>>(params, grads, m, v, s,
                                                  pieces);
  FoldKernel<<<Blocks(pieces.num_tensors), kThreads, 0, stream>>>(pieces);
  LambApplyKernel<<<blocks, kThreads, 0, stream>>>(params, m, v, s, lr, pieces);
}

void LaunchLars(float* params, const float* grads, float* b,
                const LarsScalars& s, double lr, const Pieces& pieces,
                cudaStream_t stream) {
  const unsigned int blocks = PieceBlocks(pieces.num_pieces);
  LarsSumsKernel<<<blocks, kThreads, 0, stream>>>(params, grads, pieces);
  FoldKernel<<<Blocks(pieces.num_tensors), kThreads, 0, stream>>>(pieces);
  LarsApplyKernel<<<blocks, kThreads, 0, stream>>>(params, grads, b, s, lr,
                                                   pieces);
}

void LaunchScale(float* y, int64_t n, float scale, cudaStream_t stream) {
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, scale);
}

void LaunchSum(const SumInputs& inputs, bool accumulate, float scale,
               float* out, int64_t n, cudaStream_t stream) {
  SumKernel<<<Blocks(n), kThreads, 0, stream>>>(inputs, accumulate, scale, out,
                                                n);
}

void LaunchBiasActivationForward(const float* x, const float* bias,
                                 int64_t rows, int64_t cols, int layout,
                                 int activation, float* y,
                                 cudaStream_t stream) {
  const int64_t n = rows * cols;
  BiasActivationForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(
      x, bias, cols, n, layout, activation, y);
}

void LaunchBiasActivationBackward(const float* y, const float* dy, int64_t rows,
                                  int64_t cols, int layout, int activation,
                                  float* dx, float* bias_grad,
                                  cudaStream_t stream) {
  if (bias_grad == nullptr) {
    const int64_t n = rows * cols;
    ActivationBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(
        y, dy, n, activation, dx);
  } else if (layout == kPerRow) {
    const unsigned int blocks =
        static_cast<unsigned int>(rows < kMaxBlocks ? rows : kMaxBlocks);
    RowBiasBackwardKernel<<<blocks, kThreads, 0, stream>>>(
        y, dy, rows, cols, activation, dx, bias_grad);
  } else {
    const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
    const unsigned int blocks =
        static_cast<unsigned int>(tiles < kMaxBlocks ? tiles : kMaxBlocks);
    ColumnBiasBackwardKernel<<<blocks, dim3(kColumnTile, kRowLanes), 0,
                               stream>>>(y, dy, rows, cols, activation, dx,
                                         bias_grad);
  }
}

void LaunchFloatToBf16(const float* in, uint16_t* out, int64_t n,
                       cudaStream_t stream) {
  FloatToBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, n);
}

void LaunchBf16ToFloat(const uint16_t* in, float* out, int64_t n,
                       cudaStream_t stream) {
  Bf16ToFloatKernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, n);
}

void LaunchFloatToFp16(const float* in, uint16_t* out, int64_t n,
                       cudaStream_t stream) {
  FloatToFp16Kernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, n);
}

void LaunchFp16ToFloat(const uint16_t* in, float* out, int64_t n,
                       cudaStream_t stream) {
  Fp16ToFloatKernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, n);
}

void LaunchDropout(const float* in, float* out, uint8_t* mask, int64_t n,
                   uint64_t threshold, float scale, uint64_t seed,
                   uint64_t offset, cudaStream_t stream) {
  DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, mask, n, threshold,
                                                    scale, seed, offset);
}

}  // namespace ops_internal
}  // namespace gpu
}  // namespace cohort
