// Kernels of kernels/cuda/attention.h, behind the plain-C++ launch functions
// of kernels/cuda/attention_launch.h.
//
// Tiles of kTile = 32 positions by kD features (32, 64 or 128: the head
// dimension rounded up, padded with zeros) live in shared memory with a row
// pitch of kD + 1 floats, so that both the row-wise and the column-wise
// walks below hit 32 different banks. 128 threads per block; each thread
// keeps kTile * kD / 128 output accumulators in registers. Global loads and
// stores walk positions fastest (contiguous in memory in both layouts).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_launch.h"

namespace cohort {
namespace gpu {
namespace attention_internal {
namespace {

constexpr int kTile = 32;
constexpr int kThreads = 128;
constexpr int kLdS = kTile + 1;  // pitch of the kTile x kTile score tiles

template <int kD>
constexpr int Pitch() {
  return kD + 1;
}
template <int kD>
constexpr int TileFloats() {
  return kTile * Pitch<kD>();
}

// Dynamic shared memory of each kernel, in bytes.
template <int kD>
constexpr size_t ForwardSmem() {
  return (3 * TileFloats<kD>() + kTile * kLdS + 3 * kTile) * sizeof(float);
}
template <int kD>
constexpr size_t KeyValueSmem() {
  return (4 * TileFloats<kD>() + 2 * kTile * kLdS + 2 * kTile) * sizeof(float);
}
template <int kD>
constexpr size_t QuerySmem() {
  return (4 * TileFloats<kD>() + kTile * kLdS + 2 * kTile) * sizeof(float);
}

// tile[r][d] = base[d * fs + t0 + r] for d < dh and t0 + r < l, else 0.
template <int kD>
__device__ void LoadTile(const float* base, int64_t fs, int64_t t0, int64_t l,
                         int dh, float* tile) {
  for (int e = threadIdx.x; e < kTile * kD; e += kThreads) {
    const int d = e / kTile, r = e % kTile;
    const int64_t t = t0 + r;
    float v = 0;
    if (d < dh && t < l) v = base[d * fs + t];
    tile[r * Pitch<kD>() + d] = v;
  }
}

// The reverse: base[d * fs + t0 + r] = tile[r][d] inside the bounds.
template <int kD>
__device__ void StoreTile(const float* tile, float* base, int64_t fs,
                          int64_t t0, int64_t l, int dh) {
  for (int e = threadIdx.x; e < kTile * kD; e += kThreads) {
    const int d = e / kTile, r = e % kTile;
    const int64_t t = t0 + r;
    if (d < dh && t < l) base[d * fs + t] = tile[r * Pitch<kD>() + d];
  }
}

template <int kD>
__device__ float Dot(const float* a, const float* b) {
  float s = 0;
#pragma unroll 8
  for (int d = 0; d < kD; ++d) s += a[d] * b[d];
  return s;
}

__device__ bool Visible(const AttentionArgs& a, int64_t q, int64_t k) {
  return q < a.l && k < a.l && (!a.causal || k <= q);
}

// One block per (query tile, head, sample): the running row maximum m and
// sum l of exp(s - m) over the key tiles seen so far, the output rows
// rescaled by exp(m_old - m_new) whenever the maximum grows.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(AttentionArgs a, const float* qkv, float* out, float* lse) {
  extern __shared__ float smem[];
  constexpr int ld = Pitch<kD>();
  constexpr int kAcc = kTile * kD / kThreads;
  float* qs = smem;
  float* ks = qs + TileFloats<kD>();
  float* vs = ks + TileFloats<kD>();
  float* s = vs + TileFloats<kD>();
  float* alpha = s + kTile * kLdS;
  float* row_m = alpha + kTile;
  float* row_l = row_m + kTile;

  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int dh = static_cast<int>(a.head_dim);
  const int64_t features = a.heads * a.head_dim;
  const float* qbase = qkv + n * a.qkv_ss + h * a.head_dim * a.qkv_fs;
  const float* kbase = qbase + features * a.qkv_fs;
  const float* vbase = kbase + features * a.qkv_fs;

  LoadTile<kD>(qbase, a.qkv_fs, q0, a.l, dh, qs);
  if (threadIdx.x < kTile) {
    row_m[threadIdx.x] = -INFINITY;
    row_l[threadIdx.x] = 0;
  }
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0;

  // Causal: key tiles past this query tile's diagonal see nothing.
  const int64_t tiles = a.causal ? blockIdx.x + 1 : (a.l + kTile - 1) / kTile;
  for (int64_t kt = 0; kt < tiles; ++kt) {
    const int64_t k0 = kt * kTile;
    __syncthreads();  // the previous tile's readers are done
    LoadTile<kD>(kbase, a.qkv_fs, k0, a.l, dh, ks);
    LoadTile<kD>(vbase, a.qkv_fs, k0, a.l, dh, vs);
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
      const int r = e / kTile, c = e % kTile;
      float v = -INFINITY;
      if (Visible(a, q0 + r, k0 + c)) {
        v = Dot<kD>(qs + r * ld, ks + c * ld) * a.scale;
      }
      s[r * kLdS + c] = v;
    }
    __syncthreads();
    if (threadIdx.x < kTile) {
      const int r = threadIdx.x;
      float* sr = s + r * kLdS;
      const float m_old = row_m[r];
      float m = m_old;
      for (int c = 0; c < kTile; ++c) m = fmaxf(m, sr[c]);
      float scale_old = 1, sum = 0;
      if (m == -INFINITY) {  // nothing visible yet in this row
        for (int c = 0; c < kTile; ++c) sr[c] = 0;
      } else {
        scale_old = expf(m_old - m);  // 0 while m_old is -inf
        for (int c = 0; c < kTile; ++c) {
          const float p = expf(sr[c] - m);
          sr[c] = p;
          sum += p;
        }
      }
      row_l[r] = row_l[r] * scale_old + sum;
      row_m[r] = m;
      alpha[r] = scale_old;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const int e = threadIdx.x + i * kThreads;
      const int r = e / kD, d = e % kD;
      const float* pr = s + r * kLdS;
      float o = acc[i] * alpha[r];
      for (int c = 0; c < kTile; ++c) o += pr[c] * vs[c * ld + d];
      acc[i] = o;
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / kD, d = e % kD;
    const float lr = row_l[r];
    qs[r * ld + d] = lr > 0 ? acc[i] / lr : 0.0f;
  }
  if (threadIdx.x < kTile) {
    const int64_t q = q0 + threadIdx.x;
    if (q < a.l) {
      lse[(n * a.heads + h) * a.l + q] =
          row_m[threadIdx.x] + logf(row_l[threadIdx.x]);
    }
  }
  __syncthreads();
  StoreTile<kD>(qs, out + n * a.out_ss + h * a.head_dim * a.out_fs, a.out_fs,
                q0, a.l, dh);
}

// delta[(n * H + h) * L + t] = sum over the head's features of dO * O.
__global__ void DeltaKernel(AttentionArgs a, const float* out,
                            const float* grad_out, float* delta) {
  const int64_t rows = a.n * a.heads * a.l;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < rows; i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t t = i % a.l;
    const int64_t h = (i / a.l) % a.heads;
    const int64_t n = i / (a.l * a.heads);
    const int64_t base = n * a.out_ss + h * a.head_dim * a.out_fs + t;
    float sum = 0;
    for (int64_t d = 0; d < a.head_dim; ++d) {
      sum += grad_out[base + d * a.out_fs] * out[base + d * a.out_fs];
    }
    delta[i] = sum;
  }
}

// The block's P and dS tile for query rows q0.. and key rows k0..:
// P = exp(scale q.k - lse), dS = P (dO.v - Di); zero where masked.
template <int kD>
__device__ void ScoreGradTile(const AttentionArgs& a, int64_t q0, int64_t k0,
                              const float* qs, const float* dos,
                              const float* ks, const float* vs,
                              const float* lse_s, const float* di_s, float* p,
                              float* ds) {
  constexpr int ld = Pitch<kD>();
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int r = e / kTile, c = e % kTile;
    float pv = 0, dsv = 0;
    if (Visible(a, q0 + r, k0 + c)) {
      pv = expf(Dot<kD>(qs + r * ld, ks + c * ld) * a.scale - lse_s[r]);
      const float dp = Dot<kD>(dos + r * ld, vs + c * ld);
      dsv = pv * (dp - di_s[r]);
    }
    if (p != nullptr) p[r * kLdS + c] = pv;
    ds[r * kLdS + c] = dsv;
  }
}

__device__ void LoadRowStats(const AttentionArgs& a, int64_t row0, int64_t q0,
                             const float* lse, const float* delta, float* lse_s,
                             float* di_s) {
  if (threadIdx.x < kTile) {
    const int64_t q = q0 + threadIdx.x;
    lse_s[threadIdx.x] = q < a.l ? lse[row0 + q] : 0.0f;
    di_s[threadIdx.x] = q < a.l ? delta[row0 + q] : 0.0f;
  }
}

// One block per (key tile, head, sample): dK and dV of its keys, summed
// over the query tiles that see them.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    KeyValueGradKernel(AttentionArgs a, const float* qkv, const float* grad_out,
                       const float* lse, const float* delta, float* grad_qkv) {
  extern __shared__ float smem[];
  constexpr int ld = Pitch<kD>();
  constexpr int kAcc = kTile * kD / kThreads;
  float* ks = smem;
  float* vs = ks + TileFloats<kD>();
  float* qs = vs + TileFloats<kD>();
  float* dos = qs + TileFloats<kD>();
  float* p = dos + TileFloats<kD>();
  float* ds = p + kTile * kLdS;
  float* lse_s = ds + kTile * kLdS;
  float* di_s = lse_s + kTile;

  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int dh = static_cast<int>(a.head_dim);
  const int64_t features = a.heads * a.head_dim;
  const int64_t head_offset = n * a.qkv_ss + h * a.head_dim * a.qkv_fs;
  const float* qbase = qkv + head_offset;
  const float* kbase = qbase + features * a.qkv_fs;
  const float* vbase = kbase + features * a.qkv_fs;
  const float* dobase = grad_out + n * a.out_ss + h * a.head_dim * a.out_fs;
  const int64_t row0 = (n * a.heads + h) * a.l;

  LoadTile<kD>(kbase, a.qkv_fs, k0, a.l, dh, ks);
  LoadTile<kD>(vbase, a.qkv_fs, k0, a.l, dh, vs);
  float dk[kAcc], dv[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) dk[i] = dv[i] = 0;

  const int64_t tiles = (a.l + kTile - 1) / kTile;
  // Causal: query tiles before this key tile's diagonal see none of it.
  for (int64_t qt = a.causal ? blockIdx.x : 0; qt < tiles; ++qt) {
    const int64_t q0 = qt * kTile;
    __syncthreads();
    LoadTile<kD>(qbase, a.qkv_fs, q0, a.l, dh, qs);
    LoadTile<kD>(dobase, a.out_fs, q0, a.l, dh, dos);
    LoadRowStats(a, row0, q0, lse, delta, lse_s, di_s);
    __syncthreads();
    ScoreGradTile<kD>(a, q0, k0, qs, dos, ks, vs, lse_s, di_s, p, ds);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const int e = threadIdx.x + i * kThreads;
      const int c = e / kD, d = e % kD;
      float sv = dv[i], sk = dk[i];
      for (int r = 0; r < kTile; ++r) {
        sv += p[r * kLdS + c] * dos[r * ld + d];
        sk += ds[r * kLdS + c] * qs[r * ld + d];
      }
      dv[i] = sv;
      dk[i] = sk;
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int c = e / kD, d = e % kD;
    ks[c * ld + d] = dk[i] * a.scale;
    vs[c * ld + d] = dv[i];
  }
  __syncthreads();
  float* gq = grad_qkv + head_offset;
  StoreTile<kD>(ks, gq + features * a.qkv_fs, a.qkv_fs, k0, a.l, dh);
  StoreTile<kD>(vs, gq + 2 * features * a.qkv_fs, a.qkv_fs, k0, a.l, dh);
}

// One block per (query tile, head, sample): dQ of its queries, summed over
// the key tiles they see.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    QueryGradKernel(AttentionArgs a, const float* qkv, const float* grad_out,
                    const float* lse, const float* delta, float* grad_qkv) {
  extern __shared__ float smem[];
  constexpr int ld = Pitch<kD>();
  constexpr int kAcc = kTile * kD / kThreads;
  float* qs = smem;
  float* dos = qs + TileFloats<kD>();
  float* ks = dos + TileFloats<kD>();
  float* vs = ks + TileFloats<kD>();
  float* ds = vs + TileFloats<kD>();
  float* lse_s = ds + kTile * kLdS;
  float* di_s = lse_s + kTile;

  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int dh = static_cast<int>(a.head_dim);
  const int64_t features = a.heads * a.head_dim;
  const int64_t head_offset = n * a.qkv_ss + h * a.head_dim * a.qkv_fs;
  const float* qbase = qkv + head_offset;
  const float* kbase = qbase + features * a.qkv_fs;
  const float* vbase = kbase + features * a.qkv_fs;
  const float* dobase = grad_out + n * a.out_ss + h * a.head_dim * a.out_fs;
  const int64_t row0 = (n * a.heads + h) * a.l;

  LoadTile<kD>(qbase, a.qkv_fs, q0, a.l, dh, qs);
  LoadTile<kD>(dobase, a.out_fs, q0, a.l, dh, dos);
  LoadRowStats(a, row0, q0, lse, delta, lse_s, di_s);
  float dq[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) dq[i] = 0;

  const int64_t tiles = a.causal ? blockIdx.x + 1 : (a.l + kTile - 1) / kTile;
  for (int64_t kt = 0; kt < tiles; ++kt) {
    const int64_t k0 = kt * kTile;
    __syncthreads();
    LoadTile<kD>(kbase, a.qkv_fs, k0, a.l, dh, ks);
    LoadTile<kD>(vbase, a.qkv_fs, k0, a.l, dh, vs);
    __syncthreads();
    ScoreGradTile<kD>(a, q0, k0, qs, dos, ks, vs, lse_s, di_s, nullptr, ds);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const int e = threadIdx.x + i * kThreads;
      const int r = e / kD, d = e % kD;
      float sq = dq[i];
      for (int c = 0; c < kTile; ++c) sq += ds[r * kLdS + c] * ks[c * ld + d];
      dq[i] = sq;
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / kD, d = e % kD;
    qs[r * ld + d] = dq[i] * a.scale;
  }
  __syncthreads();
  StoreTile<kD>(qs, grad_qkv + head_offset, a.qkv_fs, q0, a.l, dh);
}

template <int kD>
cudaError_t Prepare() {
  cudaError_t e = cudaFuncSetAttribute(
      ForwardKernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(ForwardSmem<kD>()));
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(KeyValueGradKernel<kD>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(KeyValueSmem<kD>()));
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(QueryGradKernel<kD>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(QuerySmem<kD>()));
}

dim3 Grid(const AttentionArgs& a) {
  return dim3(static_cast<unsigned int>((a.l + kTile - 1) / kTile),
              static_cast<unsigned int>(a.heads),
              static_cast<unsigned int>(a.n));
}

template <int kD>
void Forward(const AttentionArgs& a, const float* qkv, float* out, float* lse,
             cudaStream_t stream) {
  ForwardKernel<kD>
      <<<Grid(a), kThreads, ForwardSmem<kD>(), stream>>>(a, qkv, out, lse);
}

template <int kD>
void Backward(const AttentionArgs& a, const float* qkv, const float* grad_out,
              const float* lse, const float* delta, float* grad_qkv,
              cudaStream_t stream) {
  KeyValueGradKernel<kD><<<Grid(a), kThreads, KeyValueSmem<kD>(), stream>>>(
      a, qkv, grad_out, lse, delta, grad_qkv);
  QueryGradKernel<kD><<<Grid(a), kThreads, QuerySmem<kD>(), stream>>>(
      a, qkv, grad_out, lse, delta, grad_qkv);
}

}  // namespace

cudaError_t PrepareAttentionKernels() {
  cudaError_t e = Prepare<32>();
  if (e == cudaSuccess) e = Prepare<64>();
  if (e == cudaSuccess) e = Prepare<128>();
  return e;
}

void LaunchAttentionForward(const AttentionArgs& a, const float* qkv,
                            float* out, float* lse, cudaStream_t stream) {
  if (a.head_dim <= 32) {
    Forward<32>(a, qkv, out, lse, stream);
  } else if (a.head_dim <= 64) {
    Forward<64>(a, qkv, out, lse, stream);
  } else {
    Forward<128>(a, qkv, out, lse, stream);
  }
}

void LaunchAttentionBackward(const AttentionArgs& a, const float* qkv,
                             const float* out, const float* grad_out,
                             const float* lse, float* delta, float* grad_qkv,
                             cudaStream_t stream) {
  const int64_t rows = a.n * a.heads * a.l;
  int64_t blocks = (rows + 255) / 256;
  if (blocks > 65535) blocks = 65535;
  DeltaKernel<<<static_cast<unsigned int>(blocks), 256, 0, stream>>>(
      a, out, grad_out, delta);
  if (a.head_dim <= 32) {
    Backward<32>(a, qkv, grad_out, lse, delta, grad_qkv, stream);
  } else if (a.head_dim <= 64) {
    Backward<64>(a, qkv, grad_out, lse, delta, grad_qkv, stream);
  } else {
    Backward<128>(a, qkv, grad_out, lse, delta, grad_qkv, stream);
  }
}

}  // namespace attention_internal
}  // namespace gpu
}  // namespace cohort
