// Channel-vectorized convolution kernels (see conv_internal.h).
//
// Forward: a tile holds out[p + i][16 channels] for 6 positions in 12
// accumulators; per filter tap it loads the 16 weights (packed [k][16]) and
// broadcasts the 6 inputs. Tiles write [position][channel] rows to scratch,
// and 8x8 transposes move them to the [channel][position] output.
// Weight gradient: the output gradient is transposed to [position][16] per
// chunk; a block of 6 taps x 16 channels then sums x[tap at p] * dy[p][:]
// over the chunk's positions in registers.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "kernels/conv_internal.h"

namespace cohort {
namespace conv_internal {
namespace {

constexpr int kLanes = 16;     // channels per block (two AVX registers)
constexpr int kPositions = 6;  // positions per forward tile
constexpr int kTaps = 6;       // taps per weight-gradient block
// Positions per chunk: 16 channels x 512 positions of scratch (32 KiB).
constexpr int64_t kChunk = 512;

// dst[c][r] = src[r][c] for an 8x8 block (rows lds / ldd apart).
void Transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    for (int j = 0; j < 2; ++j) {
      r[i + j] = _mm256_shuffle_ps(t[i + j], t[i + 2 + j], 0x44);
      r[i + 2 + j] = _mm256_shuffle_ps(t[i + j], t[i + 2 + j], 0xEE);
    }
  }
  // r[0..3]: columns 0,2,1,3 of rows 0-3 | rows 4-7 come from r[4..7].
  const int order[4] = {0, 2, 1, 3};
  for (int i = 0; i < 4; ++i) {
    const int q = order[i];
    _mm256_storeu_ps(dst + i * ldd,
                     _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd,
                     _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
  }
}

// Moves scratch rows [position][16] (positions [0, len)) to out[oc][p0 + j]
// (rows ld apart) for the channels below `channels`.
void Unpack(const float* y, int64_t len, int64_t channels, float* out,
            int64_t ld) {
  int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    for (int64_t c0 = 0; c0 + 8 <= channels; c0 += 8) {
      Transpose8x8(y + j * kLanes + c0, kLanes, out + c0 * ld + j, ld);
    }
  }
  for (int64_t c = channels / 8 * 8; c < channels; ++c) {
    for (int64_t p = 0; p < j; ++p) out[c * ld + p] = y[p * kLanes + c];
  }
  for (; j < len; ++j) {
    for (int64_t c = 0; c < channels; ++c) out[c * ld + j] = y[j * kLanes + c];
  }
}

// y[i][0..16) = bias + sum_k w[k][0..16) * x[off[k] + base[i]], i < P.
template <int P>
void ForwardTile(const float* x, const int64_t* base, const int64_t* off,
                 int64_t kk, const float* w, const float* bias, float* y) {
  __m256 acc[P][2];
  const __m256 b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) acc[i][0] = b0, acc[i][1] = b1;
  int64_t bases[P];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) bases[i] = base[i];
  for (int64_t k = 0; k < kk; ++k) {
    const __m256 w0 = _mm256_load_ps(w + k * kLanes);
    const __m256 w1 = _mm256_load_ps(w + k * kLanes + 8);
    const float* xk = x + off[k];
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      const __m256 a = _mm256_broadcast_ss(xk + bases[i]);
      acc[i][0] = _mm256_fmadd_ps(a, w0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, w1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) {
    _mm256_storeu_ps(y + i * kLanes, acc[i][0]);
    _mm256_storeu_ps(y + i * kLanes + 8, acc[i][1]);
  }
}

using ForwardFn = void (*)(const float*, const int64_t*, const int64_t*,
                           int64_t, const float*, const float*, float*);
constexpr ForwardFn kForwardFns[kPositions + 1] = {
    nullptr,         &ForwardTile<1>, &ForwardTile<2>, &ForwardTile<3>,
    &ForwardTile<4>, &ForwardTile<5>, &ForwardTile<6>};

// offsets = [tap offsets (TapOffsets) | base[p] = oh * W + ow, where output
// position p of a sample reads tap 0]. Returns the bases.
const int64_t* TapsAndBases(const GridConv& g, std::vector<int64_t>* offsets) {
  TapOffsets(g, offsets);
  const int64_t kk = g.patch();
  offsets->resize(kk + g.out_h() * g.out_w());
  int64_t* base = offsets->data() + kk;
  for (int64_t r = 0; r < g.out_h(); ++r) {
    for (int64_t c = 0; c < g.out_w(); ++c) *base++ = r * g.width + c;
  }
  return offsets->data() + kk;
}

// Chunks of a sample's positions: [p0, p1).
template <typename F>
void ForEachChunk(int64_t positions, F f) {
  for (int64_t p0 = 0; p0 < positions; p0 += kChunk) {
    f(p0, std::min(positions, p0 + kChunk));
  }
}

// dst[p][c] = src[c * ld + p] for p < len, c < 16 (zero for c >= channels).
void Pack(const float* src, int64_t ld, int64_t len, int64_t channels,
          float* dst) {
  int64_t j = 0;
  if (channels == kLanes) {
    for (; j + 8 <= len; j += 8) {
      Transpose8x8(src + j, ld, dst + j * kLanes, kLanes);
      Transpose8x8(src + 8 * ld + j, ld, dst + j * kLanes + 8, kLanes);
    }
  }
  for (; j < len; ++j) {
    for (int64_t c = 0; c < kLanes; ++c) {
      dst[j * kLanes + c] = c < channels ? src[c * ld + j] : 0.0f;
    }
  }
}

// acc[i][0..16) += sum_p x[base[p] + off[i]] * dy[p][0..16) for i < KT taps;
// acc rows are 16 floats apart.
template <int KT>
void GradTaps(const float* x, const int64_t* base, int64_t len,
              const int64_t* off, const float* dy, float* acc_out) {
  __m256 acc[KT][2];
  int64_t offs[KT];
#pragma GCC unroll 8
  for (int i = 0; i < KT; ++i) {
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    offs[i] = off[i];
  }
  for (int64_t p = 0; p < len; ++p) {
    const float* xp = x + base[p];
    const __m256 d0 = _mm256_load_ps(dy + p * kLanes);
    const __m256 d1 = _mm256_load_ps(dy + p * kLanes + 8);
#pragma GCC unroll 8
    for (int i = 0; i < KT; ++i) {
      const __m256 a = _mm256_broadcast_ss(xp + offs[i]);
      acc[i][0] = _mm256_fmadd_ps(a, d0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, d1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < KT; ++i) {
    float* o = acc_out + i * kLanes;
    _mm256_store_ps(o, _mm256_add_ps(_mm256_load_ps(o), acc[i][0]));
    _mm256_store_ps(o + 8, _mm256_add_ps(_mm256_load_ps(o + 8), acc[i][1]));
  }
}

using GradFn = void (*)(const float*, const int64_t*, int64_t, const int64_t*,
                        const float*, float*);
constexpr GradFn kGradFns[kTaps + 1] = {
    nullptr,      &GradTaps<1>, &GradTaps<2>, &GradTaps<3>,
    &GradTaps<4>, &GradTaps<5>, &GradTaps<6>};

}  // namespace

void ChannelForward(const GridConv& g, const float* x, const float* w,
                    const float* bias, float* out, Tensor* packed,
                    Tensor* scratch, std::vector<int64_t>* offsets) {
  DCHECK(g.pad_w == 0);
  const int64_t kk = g.patch(), oc = g.out_channels;
  const int64_t blocks = (oc + kLanes - 1) / kLanes;
  const int64_t positions = g.out_h() * g.out_w();
  // packed: per block [k][16] weights, then [16] biases, zero-padded.
  EnsureSize(packed, blocks * (kk + 1) * kLanes);
  packed->SetZero();
  float* pw = packed->data();
  for (int64_t o = 0; o < oc; ++o) {
    float* blk = pw + (o / kLanes) * (kk + 1) * kLanes + o % kLanes;
    for (int64_t k = 0; k < kk; ++k) blk[k * kLanes] = w[o * kk + k];
    blk[kk * kLanes] = bias ? bias[o] : 0.0f;
  }
  const int64_t* base = TapsAndBases(g, offsets);
  EnsureSize(scratch, kChunk * kLanes);
  float* y = scratch->data();
  const int64_t ld = g.batch * positions;
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xs = x + n * g.height * g.width;
    ForEachChunk(positions, [&](int64_t p0, int64_t p1) {
      for (int64_t b = 0; b < blocks; ++b) {
        const float* wb = pw + b * (kk + 1) * kLanes;
        for (int64_t p = p0; p < p1; p += kPositions) {
          const int np = std::min<int64_t>(kPositions, p1 - p);
          kForwardFns[np](xs, base + p, offsets->data(), kk, wb,
                          wb + kk * kLanes, y + (p - p0) * kLanes);
        }
        Unpack(y, p1 - p0, std::min<int64_t>(kLanes, oc - b * kLanes),
               out + b * kLanes * ld + n * positions + p0, ld);
      }
    });
  }
}

void ChannelWeightGrad(const GridConv& g, const float* x, const float* grad_out,
                       float* grad_w, Tensor* scratch,
                       std::vector<int64_t>* offsets) {
  DCHECK(g.pad_w == 0);
  const int64_t kk = g.patch(), oc = g.out_channels;
  const int64_t blocks = (oc + kLanes - 1) / kLanes;
  const int64_t positions = g.out_h() * g.out_w();
  const int64_t* base = TapsAndBases(g, offsets);
  const int64_t* off = offsets->data();
  // scratch: [16] x chunk transposed gradient, then [blocks][kk][16] sums.
  EnsureSize(scratch, kChunk * kLanes + blocks * kk * kLanes);
  float* dy = scratch->data();
  float* sums = dy + kChunk * kLanes;
  std::memset(sums, 0, blocks * kk * kLanes * sizeof(float));
  const int64_t ld = g.batch * positions;
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xs = x + n * g.height * g.width;
    ForEachChunk(positions, [&](int64_t p0, int64_t p1) {
      for (int64_t b = 0; b < blocks; ++b) {
        Pack(grad_out + b * kLanes * ld + n * positions + p0, ld, p1 - p0,
             std::min<int64_t>(kLanes, oc - b * kLanes), dy);
        for (int64_t k0 = 0; k0 < kk; k0 += kTaps) {
          const int kt = std::min<int64_t>(kTaps, kk - k0);
          kGradFns[kt](xs, base + p0, p1 - p0, off + k0, dy,
                       sums + (b * kk + k0) * kLanes);
        }
      }
    });
  }
  for (int64_t o = 0; o < oc; ++o) {
    const float* src = sums + (o / kLanes) * kk * kLanes + o % kLanes;
    for (int64_t k = 0; k < kk; ++k) grad_w[o * kk + k] = src[k * kLanes];
  }
}

}  // namespace conv_internal
}  // namespace cohort
