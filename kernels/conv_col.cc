// Column input gradient of a stride-1 convolution (see conv_internal.h).
//
// For a chunk of output positions, dcol[k][j] = sum_oc W[oc][k] * dy[oc][j]
// runs on the register tiles of conv_tile.h (rows = the C*KH*KW taps,
// reduction over output channels), and col2im then adds each tap's row into
// the input gradient as contiguous runs. The chunk keeps dcol in L2.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "kernels/conv_internal.h"
#include "kernels/conv_tile.h"

namespace cohort {
namespace conv_internal {
namespace {

// Floats of dcol per chunk (128 KiB), and at most this many positions.
constexpr int64_t kColChunkFloats = 32768;
constexpr int64_t kMaxChunk = 512;

// Mask of the first `n` (1..8) lanes.
__m256i FirstLanesMask(int64_t n) {
  static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                     0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n));
}

// dst[i] += src[i], vectorized (the compiler's -O2 cost model leaves loops
// of unknown length scalar).
void AddTo(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i),
                                            _mm256_loadu_ps(src + i)));
  }
  for (; i < n; ++i) dst[i] += src[i];
}

// A run of output positions of one chunk within one output row.
struct Run {
  int64_t plane_offset;  // of the sample's plane in channel 0 of grad_in
  int64_t row;           // output row
  int64_t col;           // first output column
  int64_t len;
  int64_t at;  // column of the first position in dcol
};

// Splits output positions [p0, p1) into runs within one output row.
int64_t SplitRuns(const ConvGeometry& g, int64_t p0, int64_t p1, Run* runs) {
  const int64_t oh = g.out_h(), ow = g.out_w();
  int64_t n_runs = 0;
  for (int64_t p = p0; p < p1;) {
    const int64_t n = p / (oh * ow), len = std::min(p1 - p, ow - p % ow);
    runs[n_runs++] = {n * g.in_h * g.in_w, p / ow % oh, p % ow, len, p - p0};
    p += len;
  }
  return n_runs;
}

// grad_in += col2im(dcol) for the runs of one chunk (dcol rows ld apart),
// stride 1: each tap adds a contiguous run of the input gradient per run.
// Taps that shift the same run sideways (kw) write overlapping ranges, and
// a load that overlaps a store still in the store buffer stalls until it
// drains (measured 3x slower with kw innermost), so kw is the outer loop.
void Col2imChunk(const ConvGeometry& g, const Run* runs, int64_t n_runs,
                 const float* dcol, int64_t ld, float* grad_in) {
  const int64_t channel_plane = g.batch * g.in_h * g.in_w;
  for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
    for (int64_t c = 0; c < g.in_channels; ++c) {
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        const float* src =
            dcol + ((c * g.kernel_h + kh) * g.kernel_w + kw) * ld;
        float* dst = grad_in + c * channel_plane;
        for (int64_t i = 0; i < n_runs; ++i) {
          const Run& run = runs[i];
          const int64_t ih = run.row + kh - g.pad_h;
          if (ih < 0 || ih >= g.in_h) continue;
          const int64_t iw0 = run.col + kw - g.pad_w;
          const int64_t s = std::max<int64_t>(0, -iw0);
          const int64_t e = std::min(run.len, g.in_w - iw0);
          if (s >= e) continue;
          AddTo(dst + run.plane_offset + ih * g.in_w + iw0 + s,
                src + run.at + s, e - s);
        }
      }
    }
  }
}

// dcol for positions [p0, p0 + len) by plain loops (runs shorter than a
// vector).
void DcolScalar(const ConvGeometry& g, const float* grad_out,
                const float* weight, int64_t p0, int64_t len, float* dcol,
                int64_t ld) {
  const int64_t kk = g.patch(), np = g.positions();
  for (int64_t k = 0; k < kk; ++k) {
    for (int64_t j = 0; j < len; ++j) {
      float s = 0;
      for (int64_t o = 0; o < g.out_channels; ++o) {
        s += weight[o * kk + k] * grad_out[o * np + p0 + j];
      }
      dcol[k * ld + j] = s;
    }
  }
}

// packed[k0*OC + o*m + i] = W[o][k0 + i]: W^T in row blocks of m taps.
void PackTransposed(const ConvGeometry& g, const float* weight, int block_m,
                    Tensor* packed) {
  const int64_t kk = g.patch(), oc = g.out_channels;
  EnsureSize(packed, kk * oc);
  float* p = packed->data();
  for (int64_t k0 = 0; k0 < kk; k0 += block_m) {
    const int64_t m = std::min<int64_t>(block_m, kk - k0);
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t i = 0; i < m; ++i) {
        p[k0 * oc + o * m + i] = weight[o * kk + k0 + i];
      }
    }
  }
}

// Input rows of at most this many vectors, and kernels of at most this
// width, use Col2imSamples.
constexpr int kMaxRowVectors = 8;
constexpr int kMaxKernel = 16;

// grad_in = col2im(dcol) for whole samples [n0, n0 + count) (dcol rows ld
// apart, sample n0's first position at column 0), stride 1, input rows of
// NVEC vectors. Each input-gradient row is summed in registers from the
// K*K shifted output rows that reach it and stored once: no read-modify-
// write, no zeroing pass. Masked loads supply the zeros where a shifted
// row does not cover a lane. NVEC is a template argument so that the row
// stays in registers.
template <int NVEC>
void Col2imSamples(const ConvGeometry& g, int64_t n0, int64_t count,
                   const float* dcol, int64_t ld, float* grad_in) {
  const int64_t oh = g.out_h(), ow = g.out_w(), w = g.in_w;
  DCHECK((w + 7) / 8 == NVEC && g.kernel_w <= kMaxKernel);
  // mask[kw][v]: lanes iw of vector v with 0 <= iw - kw + pad_w < OW.
  __m256i mask[kMaxKernel][NVEC];
  for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
    for (int v = 0; v < NVEC; ++v) {
      alignas(32) int32_t lanes[8];
      for (int l = 0; l < 8; ++l) {
        const int64_t src = 8 * v + l - kw + g.pad_w;
        lanes[l] = (src >= 0 && src < ow && 8 * v + l < w) ? -1 : 0;
      }
      mask[kw][v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    }
  }
  const __m256i last = FirstLanesMask(w - 8 * (NVEC - 1));
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t n = 0; n < count; ++n) {
      const float* sample = dcol + c * taps * ld + n * oh * ow;
      float* out = grad_in + ((c * g.batch + n0 + n) * g.in_h) * w;
      for (int64_t ih = 0; ih < g.in_h; ++ih, out += w) {
        __m256 acc[NVEC];
#pragma GCC unroll 8
        for (int v = 0; v < NVEC; ++v) acc[v] = _mm256_setzero_ps();
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const int64_t r = ih + g.pad_h - kh;
          if (r < 0 || r >= oh) continue;
          const float* row = sample + kh * g.kernel_w * ld + r * ow + g.pad_w;
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const float* src = row + kw * ld - kw;
#pragma GCC unroll 8
            for (int v = 0; v < NVEC; ++v) {
              acc[v] = _mm256_add_ps(
                  acc[v], _mm256_maskload_ps(src + 8 * v, mask[kw][v]));
            }
          }
        }
#pragma GCC unroll 8
        for (int v = 0; v + 1 < NVEC; ++v)
          _mm256_storeu_ps(out + 8 * v, acc[v]);
        _mm256_maskstore_ps(out + 8 * (NVEC - 1), last, acc[NVEC - 1]);
      }
    }
  }
}

using Col2imFn = void (*)(const ConvGeometry&, int64_t, int64_t, const float*,
                          int64_t, float*);

constexpr Col2imFn kCol2imSamples[kMaxRowVectors + 1] = {
    nullptr,           &Col2imSamples<1>, &Col2imSamples<2>,
    &Col2imSamples<3>, &Col2imSamples<4>, &Col2imSamples<5>,
    &Col2imSamples<6>, &Col2imSamples<7>, &Col2imSamples<8>};

// dcol[k][p - p0] for positions [p0, p1) on the register tiles.
void DcolChunk(const ConvGeometry& g, const float* grad_out,
               const float* weight, const Tensor& packed, TileShape shape,
               const int64_t* off, int64_t p0, int64_t p1, float* dcol,
               int64_t ld) {
  const int64_t len = p1 - p0;
  const int nv = std::min<int64_t>(shape.nv, len / 8);
  if (nv == 0) {
    DcolScalar(g, grad_out, weight, p0, len, dcol, ld);
    return;
  }
  // The last tile is moved back to end at p1, recomputing a few positions,
  // so that no read passes the chunk.
  for (int64_t t = p0; t < p1; t += 8 * nv) {
    const int64_t ts = std::min(t, p1 - 8 * nv);
    RunTiles(g.patch(), shape.m, nv, grad_out + ts, off, g.out_channels,
             packed.data(), nullptr, dcol + (ts - p0), ld);
  }
}

}  // namespace

void ColumnInputGrad(const ConvGeometry& g, const float* grad_out,
                     const float* weight, float* grad_in, Tensor* packed,
                     Tensor* scratch, std::vector<int64_t>* offsets) {
  DCHECK(g.stride == 1);
  const int64_t kk = g.patch(), oc = g.out_channels, np = g.positions();
  const int64_t per_sample = g.out_h() * g.out_w();
  // Whole samples per chunk when a sample's dcol fits: rows are then
  // complete within a chunk and Col2imSamples writes each one once.
  const bool by_samples = (g.in_w + 7) / 8 <= kMaxRowVectors &&
                          g.kernel_w <= kMaxKernel &&
                          kk * per_sample <= 2 * kColChunkFloats;
  const int64_t samples =
      std::max<int64_t>(1, kColChunkFloats / (kk * per_sample));
  const int64_t chunk =
      by_samples
          ? samples * per_sample
          : std::clamp<int64_t>(kColChunkFloats / kk / 32 * 32, 32, kMaxChunk);
  const TileShape shape = ChooseTiles(kk, chunk);
  PackTransposed(g, weight, shape.m, packed);
  offsets->resize(oc);
  for (int64_t o = 0; o < oc; ++o) (*offsets)[o] = o * np;
  EnsureSize(scratch, kk * chunk);
  float* dcol = scratch->data();
  if (by_samples) {
    for (int64_t n0 = 0; n0 < g.batch; n0 += samples) {
      const int64_t count = std::min(samples, g.batch - n0);
      DcolChunk(g, grad_out, weight, *packed, shape, offsets->data(),
                n0 * per_sample, (n0 + count) * per_sample, dcol, chunk);
      kCol2imSamples[(g.in_w + 7) / 8](g, n0, count, dcol, chunk, grad_in);
    }
    return;
  }
  std::memset(grad_in, 0,
              g.in_channels * g.batch * g.in_h * g.in_w * sizeof(float));
  for (int64_t p0 = 0; p0 < np; p0 += chunk) {
    const int64_t p1 = std::min(np, p0 + chunk);
    DcolChunk(g, grad_out, weight, *packed, shape, offsets->data(), p0, p1,
              dcol, chunk);
    Run runs[kMaxChunk];
    const int64_t n_runs = SplitRuns(g, p0, p1, runs);
    Col2imChunk(g, runs, n_runs, dcol, chunk, grad_in);
  }
}

}  // namespace conv_internal
}  // namespace cohort
