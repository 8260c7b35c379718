#include "kernels/conv_winograd.h"

#include <immintrin.h>

#include <algorithm>

#include "common/logging.h"
#include "kernels/conv_internal.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

constexpr int64_t kBlock = 8;  // channels per vector (nChw8c)
constexpr int64_t kOut = 4;    // outputs per tile side
constexpr int64_t kAlpha = 6;  // inputs per tile side
constexpr int64_t kElems = kAlpha * kAlpha;

// The spatial frame that input and output share (stride 1, padding 1).
struct Frame {
  int64_t batch, h, w;
  int64_t tile_rows, tile_cols;  // tiles per image
  int64_t tiles() const { return batch * tile_rows * tile_cols; }
  int64_t positions() const { return h * w; }
};

// Floats between the starts of consecutive elements' matrices: their size
// plus one cache line, so that the 36 stores (or loads) of one tile, a whole
// matrix apart, do not all fall in the same cache set when the size is a
// multiple of 4 KiB (it usually is).
int64_t ElemStride(int64_t rows, int64_t cols) { return rows * cols + 16; }

Frame FrameOf(const ConvGeometry& g) {
  return {g.batch, g.in_h, g.in_w, (g.in_h + kOut - 1) / kOut,
          (g.in_w + kOut - 1) / kOut};
}

// Temporaries that live for one pass: the transformed weights (or weight
// gradient) and the transformed output gradient.
struct Arena {
  BasicTensor<float> weights, grad;
};

Arena& ThreadArena() {
  thread_local Arena arena;
  return arena;
}

inline __m256 Set(float x) { return _mm256_set1_ps(x); }

// The 1-D transforms: each reads its values `s` vectors apart and writes
// its results `rs` apart, so one function serves a tile's columns and rows.

// B^T d: six inputs to six.
inline void InputLine(const __m256* d, int64_t s, __m256* r, int64_t rs) {
  const __m256 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s],
               d4 = d[4 * s], d5 = d[5 * s];
  const __m256 four = Set(4), five = Set(5), two = Set(2);
  const __m256 t1 = _mm256_fnmadd_ps(four, d2, d4);  // d4 - 4 d2
  const __m256 t2 = _mm256_fnmadd_ps(four, d1, d3);  // d3 - 4 d1
  const __m256 t3 = _mm256_sub_ps(d4, d2);
  const __m256 t4 = _mm256_mul_ps(two, _mm256_sub_ps(d3, d1));
  r[0] = _mm256_fmadd_ps(four, d0, _mm256_fnmadd_ps(five, d2, d4));
  r[rs] = _mm256_add_ps(t1, t2);
  r[2 * rs] = _mm256_sub_ps(t1, t2);
  r[3 * rs] = _mm256_add_ps(t3, t4);
  r[4 * rs] = _mm256_sub_ps(t3, t4);
  r[5 * rs] = _mm256_fmadd_ps(four, d1, _mm256_fnmadd_ps(five, d3, d5));
}

// A^T m: six products to four outputs.
inline void OutputLine(const __m256* m, int64_t s, __m256* o, int64_t os) {
  const __m256 s12 = _mm256_add_ps(m[s], m[2 * s]);
  const __m256 d12 = _mm256_sub_ps(m[s], m[2 * s]);
  const __m256 s34 = _mm256_add_ps(m[3 * s], m[4 * s]);
  const __m256 d34 = _mm256_sub_ps(m[3 * s], m[4 * s]);
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
  o[os] = _mm256_fmadd_ps(Set(2), d34, d12);
  o[2 * os] = _mm256_fmadd_ps(Set(4), s34, s12);
  o[3 * os] = _mm256_add_ps(_mm256_fmadd_ps(Set(8), d34, d12), m[5 * s]);
}

// A y: four output gradients to six (the transpose of OutputLine).
inline void GradLine(const __m256* y, int64_t s, __m256* e, int64_t es) {
  const __m256 y0 = y[0], y1 = y[s], y2 = y[2 * s], y3 = y[3 * s];
  const __m256 s02 = _mm256_add_ps(y0, y2), s13 = _mm256_add_ps(y1, y3);
  const __m256 t = _mm256_fmadd_ps(Set(4), y2, y0);
  const __m256 u = _mm256_fmadd_ps(Set(8), y3, _mm256_add_ps(y1, y1));
  e[0] = y0;
  e[es] = _mm256_add_ps(s02, s13);
  e[2 * es] = _mm256_sub_ps(s02, s13);
  e[3 * es] = _mm256_add_ps(t, u);
  e[4 * es] = _mm256_sub_ps(t, u);
  e[5 * es] = y3;
}

// G g: three kernel taps to six.
inline void KernelLine(const __m256* g, int64_t s, __m256* u, int64_t us) {
  const __m256 g0 = g[0], g1 = g[s], g2 = g[2 * s];
  const __m256 sum = _mm256_add_ps(g0, g2);
  const __m256 p =
      _mm256_fmadd_ps(g0, Set(1.0f / 24), _mm256_mul_ps(g2, Set(1.0f / 6)));
  const __m256 q = _mm256_mul_ps(g1, Set(1.0f / 12));
  u[0] = _mm256_mul_ps(g0, Set(0.25f));
  u[us] = _mm256_mul_ps(_mm256_add_ps(sum, g1), Set(-1.0f / 6));
  u[2 * us] = _mm256_mul_ps(_mm256_sub_ps(sum, g1), Set(-1.0f / 6));
  u[3 * us] = _mm256_add_ps(p, q);
  u[4 * us] = _mm256_sub_ps(p, q);
  u[5 * us] = g2;
}

// G^T u: six transformed-kernel gradients to three taps (KernelLine's
// transpose).
inline void KernelGradLine(const __m256* u, int64_t s, __m256* g, int64_t gs) {
  const __m256 s12 = _mm256_add_ps(u[s], u[2 * s]);
  const __m256 s34 = _mm256_add_ps(u[3 * s], u[4 * s]);
  const __m256 d21 = _mm256_sub_ps(u[2 * s], u[s]);
  const __m256 d34 = _mm256_sub_ps(u[3 * s], u[4 * s]);
  const __m256 sixth = Set(1.0f / 6);
  g[0] = _mm256_fmadd_ps(
      u[0], Set(0.25f),
      _mm256_fmadd_ps(s34, Set(1.0f / 24), _mm256_mul_ps(s12, Set(-1.0f / 6))));
  g[gs] = _mm256_fmadd_ps(d21, sixth, _mm256_mul_ps(d34, Set(1.0f / 12)));
  g[2 * gs] = _mm256_fmadd_ps(_mm256_sub_ps(s34, s12), sixth, u[5 * s]);
}

// Loads rows x cols vectors of one plane [h][w][8] starting at (r0, c0),
// zeros outside it, into x (row-major, `cols` a row).
inline void LoadBlock(const float* plane, int64_t h, int64_t w, int64_t r0,
                      int64_t c0, int64_t rows, int64_t cols, __m256* x) {
  for (int64_t a = 0; a < rows; ++a) {
    const int64_t r = r0 + a;
    const bool row_in = r >= 0 && r < h;
    for (int64_t b = 0; b < cols; ++b) {
      const int64_t c = c0 + b;
      x[a * cols + b] = row_in && c >= 0 && c < w
                            ? _mm256_loadu_ps(plane + (r * w + c) * kBlock)
                            : _mm256_setzero_ps();
    }
  }
}

// One tile's V = B^T d B, stored at v[e * stride] for each element e.
inline void InputTile(const float* plane, int64_t h, int64_t w, int64_t r0,
                      int64_t c0, float* v, int64_t stride) {
  __m256 d[kElems], t[kElems];
  LoadBlock(plane, h, w, r0, c0, kAlpha, kAlpha, d);
  for (int64_t b = 0; b < kAlpha; ++b) InputLine(d + b, kAlpha, t + b, kAlpha);
  for (int64_t a = 0; a < kAlpha; ++a) {
    InputLine(t + a * kAlpha, 1, d + a * kAlpha, 1);
  }
  for (int64_t e = 0; e < kElems; ++e) _mm256_storeu_ps(v + e * stride, d[e]);
}

// One tile's A dY A^T from the output gradient, stored like InputTile's.
inline void GradTile(const float* plane, int64_t h, int64_t w, int64_t r0,
                     int64_t c0, float* dm, int64_t stride) {
  __m256 y[kOut * kOut], t[kAlpha * kOut], e[kElems];
  LoadBlock(plane, h, w, r0, c0, kOut, kOut, y);
  for (int64_t b = 0; b < kOut; ++b) GradLine(y + b, kOut, t + b, kOut);
  for (int64_t a = 0; a < kAlpha; ++a) {
    GradLine(t + a * kOut, 1, e + a * kAlpha, 1);
  }
  for (int64_t i = 0; i < kElems; ++i) _mm256_storeu_ps(dm + i * stride, e[i]);
}

// One tile's Y = A^T M A, through the epilogue, written where it falls
// inside the plane.
inline void OutputTile(const float* m, int64_t stride, const BlockEpilogue& e,
                       float* plane, int64_t h, int64_t w, int64_t r0,
                       int64_t c0) {
  __m256 x[kElems], t[kOut * kAlpha], o[kOut * kOut];
  for (int64_t i = 0; i < kElems; ++i) x[i] = _mm256_loadu_ps(m + i * stride);
  for (int64_t b = 0; b < kAlpha; ++b) OutputLine(x + b, kAlpha, t + b, kAlpha);
  for (int64_t a = 0; a < kOut; ++a)
    OutputLine(t + a * kAlpha, 1, o + a * kOut, 1);
  const int64_t rows = std::min(kOut, h - r0), cols = std::min(kOut, w - c0);
  for (int64_t a = 0; a < rows; ++a) {
    for (int64_t b = 0; b < cols; ++b) {
      StoreThrough(e, o[a * kOut + b], plane, ((r0 + a) * w + c0 + b) * kBlock);
    }
  }
}

// Transposes the 8x8 matrix in r (r[i] lane j = element (i, j)) in place.
inline void Transpose8x8(__m256* r) {
  __m256 t[8], q[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    q[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    q[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    q[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    q[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(q[i], q[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(q[i], q[i + 4], 0x31);
  }
}

// g[k] lane l = the k-th of the 9 taps of the kernel at k0 + l * stride
// (l < 8): contiguous loads and a transpose, where a gather per tap would
// cost a microcoded instruction on AMD's cores.
inline void LoadTaps(const float* k0, int64_t stride, __m256* g) {
  for (int l = 0; l < 8; ++l) g[l] = _mm256_loadu_ps(k0 + l * stride);
  Transpose8x8(g);
  g[8] =
      _mm256_setr_ps(k0[8], k0[stride + 8], k0[2 * stride + 8],
                     k0[3 * stride + 8], k0[4 * stride + 8], k0[5 * stride + 8],
                     k0[6 * stride + 8], k0[7 * stride + 8]);
}

// The inverse of LoadTaps: the kernel at k0 + l * stride gets lane l of
// g[0..8] as its 9 taps. Overwrites g.
inline void StoreTaps(__m256* g, int64_t stride, float* k0) {
  alignas(32) float last[8];
  _mm256_store_ps(last, g[8]);
  Transpose8x8(g);
  for (int l = 0; l < 8; ++l) {
    _mm256_storeu_ps(k0 + l * stride, g[l]);
    k0[l * stride + 8] = last[l];
  }
}

// x[e] lane l = (G k G^T)[e] for the 3x3 kernel k of taps at k0 + l * stride
// (l < 8), reversed when `flip`.
inline void TransformKernels(const float* k0, int64_t stride, bool flip,
                             __m256* x) {
  __m256 taps[9], g[9], t[kAlpha * 3];
  LoadTaps(k0, stride, taps);
  for (int k = 0; k < 9; ++k) g[k] = taps[flip ? 8 - k : k];
  for (int64_t b = 0; b < 3; ++b) KernelLine(g + b, 3, t + b, 3);
  for (int64_t a = 0; a < kAlpha; ++a) {
    KernelLine(t + a * 3, 1, x + a * kAlpha, 1);
  }
}

// u[e][r][c] = (G k G^T)[e] for the 3x3 kernel k whose taps start at
// w + r * row_stride + c * col_stride (reversed when `flip`), r < rows,
// c < cols (a multiple of 8); each u[e] in PanelSgemm's panels, the B
// operand of the products. Panel by panel, so that each element's stores
// run front to back through its panel rows.
void TransformWeights(const float* w, int64_t rows, int64_t cols,
                      int64_t row_stride, int64_t col_stride, bool flip,
                      float* u) {
  const int64_t elem_stride = ElemStride(rows, cols);
  ParallelRanges(rows, kRangeAlign, [&](int64_t begin, int64_t end) {
    for (int64_t p = 0; p < cols; p += kPanelColumns) {
      const int64_t p_end = std::min(cols, p + kPanelColumns);
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t c = p; c < p_end; c += kBlock) {
          __m256 x[kElems];
          TransformKernels(w + r * row_stride + c * col_stride, col_stride,
                           flip, x);
          float* at = u + PanelOffset(cols, rows, r, c);
          for (int64_t e = 0; e < kElems; ++e) {
            _mm256_storeu_ps(at + e * elem_stride, x[e]);
          }
        }
      }
    }
  });
}

// grad_weight [OC][C][3][3] = G^T du[.][c][oc] G, du being [36][C][OC].
void TransformWeightGrad(const float* du, int64_t channels,
                         int64_t out_channels, float* grad_weight) {
  ParallelItems(channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t oc = 0; oc < out_channels; oc += kBlock) {
        __m256 x[kElems], t[3 * kAlpha], k[9];
        for (int64_t e = 0; e < kElems; ++e) {
          x[e] = _mm256_loadu_ps(du + e * ElemStride(channels, out_channels) +
                                 c * out_channels + oc);
        }
        for (int64_t b = 0; b < kAlpha; ++b) {
          KernelGradLine(x + b, kAlpha, t + b, kAlpha);
        }
        for (int64_t a = 0; a < 3; ++a) {
          KernelGradLine(t + a * kAlpha, 1, k + a * 3, 1);
        }
        StoreTaps(k, channels * 9, grad_weight + (oc * channels + c) * 9);
      }
    }
  });
}

// A run of consecutive tiles [begin, end) of the batch, and where its rows
// lie in a transformed matrix: row t - first, `stride` floats from one
// element's matrix to the next.
struct TileRun {
  int64_t begin, end;
  int64_t first, stride;
  int64_t rows() const { return end - begin; }
};

// Calls tile(plane offset of (image, block 0), tile row, tile col, row) for
// each tile of the run.
template <typename TileFn>
void ForRunTiles(const Frame& f, const TileRun& run, const TileFn& tile) {
  for (int64_t t = run.begin; t < run.end; ++t) {
    const int64_t j = t % f.tile_cols, i = t / f.tile_cols % f.tile_rows;
    const int64_t n = t / (f.tile_cols * f.tile_rows);
    tile(n, i, j, t - run.first);
  }
}

// Rows of v for the run's tiles, every channel block of the blocked input.
void InputTiles(const Frame& f, const TileRun& run, const float* in,
                int64_t channels, float* v) {
  const int64_t blocks = channels / kBlock, plane = f.positions() * kBlock;
  ForRunTiles(f, run, [&](int64_t n, int64_t i, int64_t j, int64_t row) {
    for (int64_t cb = 0; cb < blocks; ++cb) {
      InputTile(in + (n * blocks + cb) * plane, f.h, f.w, i * kOut - 1,
                j * kOut - 1, v + row * channels + cb * kBlock, run.stride);
    }
  });
}

// The run's outputs, through the epilogue, from its rows of m.
void OutputTiles(const Frame& f, const TileRun& run, const float* m,
                 int64_t channels, const ConvEpilogue& epilogue, float* out) {
  const int64_t blocks = channels / kBlock, plane = f.positions() * kBlock;
  ForRunTiles(f, run, [&](int64_t n, int64_t i, int64_t j, int64_t row) {
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const int64_t offset = (n * blocks + cb) * plane;
      OutputTile(m + row * channels + cb * kBlock, run.stride,
                 ForBlock(epilogue, cb, offset), out + offset, f.h, f.w,
                 i * kOut, j * kOut);
    }
  });
}

// Runs product(e) for the 36 elements: split over the compute team when
// `split`, else one after another on this thread. Each product runs on one
// thread, so the results are the same either way.
template <typename ProductFn>
void ForEachElement(bool split, const ProductFn& product) {
  const int64_t threads = RangeSlots();
  if (split && threads > 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t e = 0; e < kElems; ++e) product(e);
  } else {
    for (int64_t e = 0; e < kElems; ++e) product(e);
  }
}

// dm[e][t][c] from the blocked output gradient, for every tile, split over
// the compute team by tiles; each dm[e] in PanelSgemm's panels (t rows, c
// columns).
void TransformGrad(const Frame& f, const float* grad_out, int64_t channels,
                   float* dm) {
  const int64_t blocks = channels / kBlock, plane = f.positions() * kBlock;
  const int64_t stride = ElemStride(f.tiles(), channels);
  ParallelRanges(f.tiles(), kRangeAlign, [&](int64_t begin, int64_t end) {
    ForRunTiles(f, TileRun{begin, end, 0, stride},
                [&](int64_t n, int64_t i, int64_t j, int64_t row) {
                  for (int64_t cb = 0; cb < blocks; ++cb) {
                    GradTile(
                        grad_out + (n * blocks + cb) * plane, f.h, f.w,
                        i * kOut, j * kOut,
                        dm + PanelOffset(channels, f.tiles(), row, cb * kBlock),
                        stride);
                  }
                });
  });
}

// Tiles per chunk of the forward algorithm: the chunk's transformed input
// and products stay in this core's cache (half a MiB for both), but at
// least 32, so that each transformed kernel read from memory serves 32
// tiles (the wide layers, whose kernels are the larger operand). Depends on
// the shape alone, so results do not depend on the thread count.
int64_t ChunkTiles(int64_t in_channels, int64_t out_channels) {
  const int64_t fit =
      (int64_t{1} << 19) / (kElems * (in_channels + out_channels) * 4);
  return std::max<int64_t>(32, fit);
}

// Per-thread buffers of one chunk: its transformed input (when the caller
// keeps none) and its products.
struct ChunkBuffers {
  BasicTensor<float> v, m;
};

ChunkBuffers& ThreadChunk() {
  thread_local ChunkBuffers buffers;
  return buffers;
}

// One chunk of the forward algorithm; `saved` (or null) receives the
// transformed input of every tile. The products run on the team when
// `team_products` (few chunks), else on this thread.
void ConvolveChunk(const Frame& f, int64_t begin, int64_t end, const float* in,
                   int64_t in_channels, const float* u, int64_t out_channels,
                   const ConvEpilogue& epilogue, float* out, float* saved,
                   bool team_products) {
  ChunkBuffers& buf = ThreadChunk();
  TileRun in_run{begin, end, 0, ElemStride(f.tiles(), in_channels)};
  float* v = saved;
  if (saved == nullptr) {
    in_run = {begin, end, begin, ElemStride(end - begin, in_channels)};
    EnsureSize(&buf.v, kElems * in_run.stride);
    v = buf.v.data();
  }
  const TileRun out_run{begin, end, begin,
                        ElemStride(end - begin, out_channels)};
  EnsureSize(&buf.m, kElems * out_run.stride);
  InputTiles(f, in_run, in, in_channels, v);
  const float* v_rows = v + (begin - in_run.first) * in_channels;
  // m[e] = v[e] u[e]: [rows x in] by [in x out].
  const int64_t rows = end - begin;
  ForEachElement(team_products, [&](int64_t e) {
    PanelSgemm(Trans::kNo, rows, out_channels, in_channels,
               v_rows + e * in_run.stride, in_channels,
               u + e * ElemStride(in_channels, out_channels), false,
               buf.m.data() + e * out_run.stride, out_channels);
  });
  OutputTiles(f, out_run, buf.m.data(), out_channels, epilogue, out);
}

// The forward algorithm on transformed weights u [36][in][out], chunk by
// chunk: chunks split over the team, or, when there are fewer chunks than
// threads, each chunk's products.
void Convolve(const Frame& f, const float* in, int64_t in_channels,
              const float* u, int64_t out_channels,
              const ConvEpilogue& epilogue, float* out, float* saved) {
  const int64_t tiles = f.tiles();
  const int64_t most = std::min(tiles, ChunkTiles(in_channels, out_channels));
  // An even number of near-equal chunks, so that two threads (or any even
  // count dividing it) get the same work: ResNet-50's 56x56 layers at batch
  // 1 would otherwise split 4:3.
  int64_t chunks = (tiles + most - 1) / most;
  if (chunks > 1) chunks += chunks % 2;
  const int64_t chunk = (tiles + chunks - 1) / chunks;
  const int64_t threads = RangeSlots();
  const auto run = [&](int64_t k, bool team_products) {
    ConvolveChunk(f, k * chunk, std::min(tiles, (k + 1) * chunk), in,
                  in_channels, u, out_channels, epilogue, out, saved,
                  team_products);
  };
  if (threads > 1 && chunks >= threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < chunks; ++k) run(k, false);
  } else {
    for (int64_t k = 0; k < chunks; ++k) run(k, threads > 1);
  }
}

// sums[c] = the sum of channel c of a blocked tensor over batch and
// positions.
void BlockedChannelSums(const float* x, int64_t batch, int64_t channels,
                        int64_t positions, float* sums) {
  const int64_t blocks = channels / kBlock;
  for (int64_t cb = 0; cb < blocks; ++cb) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t n = 0; n < batch; ++n) {
      const float* p = x + (n * blocks + cb) * positions * kBlock;
      for (int64_t q = 0; q < positions; ++q) {
        acc = _mm256_add_ps(acc, _mm256_loadu_ps(p + q * kBlock));
      }
    }
    _mm256_storeu_ps(sums + cb * kBlock, acc);
  }
}

}  // namespace

bool WinogradApplies(const ConvGeometry& g, int64_t block) {
  return block == kBlock && g.kernel_h == 3 && g.kernel_w == 3 &&
         g.stride == 1 && g.uniform() && g.pad_h == 1 && g.pad_w == 1 &&
         g.dilation == 1 && g.groups == 1 && g.in_channels % kBlock == 0 &&
         g.out_channels % kBlock == 0;
}

bool WinogradPaysInEvaluation(const ConvGeometry& g) {
  return FrameOf(g).tiles() >= 16;
}

void WinogradForward(const ConvGeometry& g, const float* in,
                     const float* weight, const float* bias, float* out,
                     BasicTensor<float>* saved) {
  DCHECK(WinogradApplies(g, kBlock));
  const Frame f = FrameOf(g);
  Arena& arena = ThreadArena();
  EnsureSize(&arena.weights,
             kElems * ElemStride(g.in_channels, g.out_channels));
  TransformWeights(weight, g.in_channels, g.out_channels, 9, g.in_channels * 9,
                   /*flip=*/false, arena.weights.data());
  EnsureSize(saved, kElems * ElemStride(f.tiles(), g.in_channels));
  Convolve(f, in, g.in_channels, arena.weights.data(), g.out_channels,
           ConvEpilogue{nullptr, bias}, out, saved->data());
}

void WinogradForwardScaled(const ConvGeometry& g, const float* in,
                           const float* weight, const ConvEpilogue& epilogue,
                           bool frozen, BasicTensor<float>* kept,
                           const float** kept_source, float* out) {
  DCHECK(WinogradApplies(g, kBlock));
  BasicTensor<float>* u = frozen ? kept : &ThreadArena().weights;
  if (!frozen || *kept_source != weight) {
    EnsureSize(u, kElems * ElemStride(g.in_channels, g.out_channels));
    TransformWeights(weight, g.in_channels, g.out_channels, 9,
                     g.in_channels * 9, /*flip=*/false, u->data());
    *kept_source = frozen ? weight : nullptr;
  }
  Convolve(FrameOf(g), in, g.in_channels, u->data(), g.out_channels, epilogue,
           out, nullptr);
}

void WinogradBackwardWeights(const ConvGeometry& g,
                             const BasicTensor<float>& saved,
                             const float* grad_out, float* grad_weight,
                             float* grad_bias) {
  const Frame f = FrameOf(g);
  const int64_t c = g.in_channels, oc = g.out_channels, tiles = f.tiles();
  CHECK(saved.size() >= kElems * ElemStride(tiles, c))
      << "WinogradBackwardWeights before WinogradForward";
  Arena& arena = ThreadArena();
  EnsureSize(&arena.grad, kElems * ElemStride(tiles, oc));
  TransformGrad(f, grad_out, oc, arena.grad.data());
  EnsureSize(&arena.weights, kElems * ElemStride(c, oc));
  // dU[e] = V[e]^T dM[e], summed over every tile.
  ForEachElement(true, [&](int64_t e) {
    PanelSgemm(Trans::kYes, c, oc, tiles,
               saved.data() + e * ElemStride(tiles, c), c,
               arena.grad.data() + e * ElemStride(tiles, oc), false,
               arena.weights.data() + e * ElemStride(c, oc), oc);
  });
  TransformWeightGrad(arena.weights.data(), c, oc, grad_weight);
  if (grad_bias != nullptr) {
    BlockedChannelSums(grad_out, g.batch, oc, f.positions(), grad_bias);
  }
}

void WinogradBackwardInput(const ConvGeometry& g, const float* grad_out,
                           const float* weight, float* grad_in) {
  const Frame f = FrameOf(g);
  Arena& arena = ThreadArena();
  // Input gradient = the convolution of grad_out with each kernel flipped
  // and its channels swapped: u[e][oc][c].
  EnsureSize(&arena.weights,
             kElems * ElemStride(g.in_channels, g.out_channels));
  TransformWeights(weight, g.out_channels, g.in_channels, g.in_channels * 9, 9,
                   /*flip=*/true, arena.weights.data());
  Convolve(f, grad_out, g.out_channels, arena.weights.data(), g.in_channels,
           ConvEpilogue{}, grad_in, nullptr);
}

}  // namespace conv_internal
}  // namespace cohort
