// Forward kernel of the grid convolution (see conv_internal.h), built from the
// register tiles of conv_tile.h: the B operand of a tile is the input read
// at each filter tap's shift, with no packing. The tile shape is chosen
// per layer by a small cycle model, so that e.g. 3 or 16 output channels do
// not waste half of each tile.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/logging.h"
#include "kernels/conv_internal.h"
#include "kernels/conv_tile.h"

namespace cohort {
namespace conv_internal {
namespace {

// Floats of scratch per chunk of positions: 64 KiB keeps a chunk's outputs
// in L2 until they are copied out.
constexpr int64_t kChunkFloats = 16384;

// Copies grid positions [q0, q1) of sample n from the chunk scratch (row
// stride ld, position q at column q - q0 + head) to the batch-inner output,
// dropping the columns ow >= OW.
void Compact(const GridConv& g, int64_t n, int64_t q0, int64_t q1,
             const float* y, int64_t ld, int64_t head, float* out) {
  const int64_t oh = g.out_h(), ow = g.out_w();
  const int64_t channel_stride = g.batch * oh * ow;
  for (int64_t q = q0; q < q1;) {
    const int64_t r = q / g.width, c = q % g.width;
    const int64_t end = std::min(q1, (r + 1) * g.width);
    const int64_t len = std::min(ow, c + end - q) - c;
    if (len > 0) {
      for (int64_t oc = 0; oc < g.out_channels; ++oc) {
        std::memcpy(out + oc * channel_stride + (n * oh + r) * ow + c,
                    y + oc * ld + (q - q0 + head), len * sizeof(float));
      }
    }
    q = end;
  }
}

// Plain loops for samples whose span is shorter than one vector.
void ForwardSampleScalar(const GridConv& g, int64_t n, const float* x,
                         const int64_t* off, const float* packed, int block_m,
                         const float* bias, float* out) {
  const int64_t oh = g.out_h(), ow = g.out_w(), kk = g.patch();
  const float* xs = x + n * g.height * g.width;
  for (int64_t oc = 0; oc < g.out_channels; ++oc) {
    const int64_t b0 = oc / block_m * block_m, i = oc - b0;
    const int64_t m = std::min<int64_t>(block_m, g.out_channels - b0);
    const float* w = packed + b0 * kk;
    for (int64_t r = 0; r < oh; ++r) {
      for (int64_t c = 0; c < ow; ++c) {
        float s = bias ? bias[oc] : 0.0f;
        for (int64_t k = 0; k < kk; ++k) {
          s += w[k * m + i] * xs[off[k] + r * g.width + c];
        }
        out[oc * g.batch * oh * ow + (n * oh + r) * ow + c] = s;
      }
    }
  }
}

// All channel blocks of the tile of width 8*nv at grid position ts of one
// sample; `out` is where position ts of channel 0 goes, rows ld apart.
void ForwardTiles(const GridConv& g, int block_m, int nv, const float* xs,
                  int64_t ts, const int64_t* off, const float* packed,
                  const float* bias, float* out, int64_t ld) {
  RunTiles(g.out_channels, block_m, nv, xs + ts, off, g.patch(), packed, bias,
           out, ld);
}

// The tile shape of a grid convolution.
TileShape GridTiles(const GridConv& g) {
  return ChooseTiles(g.out_channels, g.span());
}

// Output position q of sample n by plain loops, skipping taps that fall
// into the virtual padding (one-row convolutions only).
void ForwardPositionScalar(const GridConv& g, int64_t n, int64_t q,
                           const float* x, const int64_t* off,
                           const float* packed, int block_m, const float* bias,
                           float* out) {
  const int64_t kk = g.patch(), ow = g.out_w();
  const float* xs = x + n * g.height * g.width + q - g.pad_w;
  for (int64_t oc = 0; oc < g.out_channels; ++oc) {
    const int64_t b0 = oc / block_m * block_m, i = oc - b0;
    const int64_t m = std::min<int64_t>(block_m, g.out_channels - b0);
    const float* w = packed + b0 * kk;
    float s = bias ? bias[oc] : 0.0f;
    for (int64_t k = 0; k < kk; ++k) {
      const int64_t col = q - g.pad_w + k % g.kernel_w;
      if (col >= 0 && col < g.width) s += w[k * m + i] * xs[off[k]];
    }
    out[(oc * g.batch + n) * ow + q] = s;
  }
}

// One output row per sample (1-D): grid positions are output positions, so
// tiles write straight into the output, and the input is read in place:
// only the pad_w positions at each end, whose taps reach into the padding,
// take the scalar path.
void ForwardRow(const GridConv& g, const float* x, const int64_t* off,
                const float* w, TileShape shape, const float* bias,
                float* out) {
  const int64_t ow = g.out_w(), pad = g.pad_w, ld = g.batch * ow;
  const int64_t lo = std::min(pad, ow), hi = std::max(lo, ow - pad);
  const int nv = std::min<int64_t>(shape.nv, (hi - lo) / 8);
  const int64_t width = 8 * nv;
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xs = x + n * g.height * g.width - pad;
    if (nv > 0) {
      for (int64_t t = lo; t < hi; t += width) {
        const int64_t ts = std::min(t, hi - width);
        ForwardTiles(g, shape.m, nv, xs, ts, off, w, bias, out + n * ow + ts,
                     ld);
      }
    }
    for (int64_t q = 0; q < ow; ++q) {
      if (nv > 0 && q == lo) q = hi;
      if (q >= ow) break;
      ForwardPositionScalar(g, n, q, x, off, w, shape.m, bias, out);
    }
  }
}

}  // namespace

void TapOffsets(const GridConv& g, std::vector<int64_t>* off) {
  const int64_t plane = g.batch * g.height * g.width;
  off->resize(g.patch());
  int64_t k = 0;
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        (*off)[k++] = c * plane + kh * g.width + kw;
      }
    }
  }
}

void PackWeights(const GridConv& g, const float* w, bool flip, Tensor* packed) {
  const int64_t kk = g.patch(), taps = g.kernel_h * g.kernel_w;
  const int block_m = GridTiles(g).m;
  EnsureSize(packed, g.out_channels * kk);
  float* p = packed->data();
  for (int64_t b0 = 0; b0 < g.out_channels; b0 += block_m) {
    const int64_t m = std::min<int64_t>(block_m, g.out_channels - b0);
    for (int64_t k = 0; k < kk; ++k) {
      const int64_t c = k / taps, t = k % taps;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t oc = b0 + i;
        // Flipped: the forward weight is [c'=oc][oc'=c][taps], rotated.
        p[b0 * kk + k * m + i] =
            flip ? w[(c * g.out_channels + oc) * taps + (taps - 1 - t)]
                 : w[oc * kk + k];
      }
    }
  }
}

void GridForward(const GridConv& g, const float* x, const Tensor& packed,
                 const float* bias, float* out, Tensor* scratch,
                 std::vector<int64_t>* offsets) {
  DCHECK(g.out_h() > 0 && g.out_w() > 0);
  TapOffsets(g, offsets);
  const int64_t* off = offsets->data();
  const float* w = packed.data();
  const int64_t span = g.span();
  const TileShape shape = GridTiles(g);
  DCHECK(g.pad_w == 0 || g.out_h() == 1);
  if (g.out_h() == 1) {
    ForwardRow(g, x, off, w, shape, bias, out);
    return;
  }
  if (span < 8) {
    for (int64_t n = 0; n < g.batch; ++n) {
      ForwardSampleScalar(g, n, x, off, w, shape.m, bias, out);
    }
    return;
  }
  // Spans shorter than a tile use narrower tiles. The last tile of a run
  // is moved back to end at the run's end, recomputing a few positions,
  // so that no read passes the end of the sample.
  const int nv = std::min<int64_t>(shape.nv, span / 8);
  const int64_t width = 8 * nv;
  const int64_t chunk =
      std::max(width, kChunkFloats / g.out_channels / width * width);
  const int64_t ld = chunk + width;
  EnsureSize(scratch, g.out_channels * ld);
  float* y = scratch->data();
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xs = x + n * g.height * g.width;
    for (int64_t q0 = 0; q0 < span; q0 += chunk) {
      const int64_t q1 = std::min(span, q0 + chunk);
      for (int64_t t = q0; t < q1; t += width) {
        const int64_t ts = std::min(t, q1 - width);
        ForwardTiles(g, shape.m, nv, xs, ts, off, w, bias,
                     y + (ts - q0 + width), ld);
      }
      Compact(g, n, q0, q1, y, ld, width, out);
    }
  }
}

}  // namespace conv_internal
}  // namespace cohort
