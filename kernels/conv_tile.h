// The register-tile microkernel shared by the grid convolution and the
// column input gradient (internal to kernels/).
//
// A tile computes M rows x 8*NV consecutive positions of
//   out[i][p] = bias[i] + sum_k w[k][i] * x[off[k] + p],
// i.e. a GEMM whose B operand rows are arbitrary offsets into one array: a
// filter tap's shifted view of the input (grid convolution) or an output
// channel's row of the gradient (column input gradient). M*NV <= 12
// accumulator registers; per k it loads NV input vectors and broadcasts M
// packed weights. Stateless; thread-safe.
#ifndef COHORT_KERNELS_CONV_TILE_H_
#define COHORT_KERNELS_CONV_TILE_H_

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace cohort {
namespace conv_internal {

// out[i][8j..8j+8) = bias[i] + sum_k w[k][i] * x[off[k] + 8j..) for i < M,
// j < NV; rows of `out` are ldy apart.
template <int M, int NV>
void ForwardTile(const float* x, const int64_t* off, int64_t kk, const float* w,
                 const float* bias, float* out, int64_t ldy) {
  __m256 acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    const __m256 init = bias ? _mm256_set1_ps(bias[i]) : _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = init;
  }
  for (int64_t k = 0; k < kk; ++k) {
    const float* xk = x + off[k];
    const float* wk = w + k * M;
    if constexpr (NV <= 3) {
      // Input vectors live in registers across the M broadcasts.
      __m256 b[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) b[j] = _mm256_loadu_ps(xk + 8 * j);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) {
        const __m256 a = _mm256_broadcast_ss(wk + i);
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) {
          acc[i][j] = _mm256_fmadd_ps(a, b[j], acc[i][j]);
        }
      }
    } else {
      // 12 accumulators + 4 input vectors + a broadcast would not fit in 16
      // registers: keep the M (<= 3) broadcasts and stream the input.
      __m256 a[M];
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) a[i] = _mm256_broadcast_ss(wk + i);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        const __m256 b = _mm256_loadu_ps(xk + 8 * j);
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
          acc[i][j] = _mm256_fmadd_ps(a[i], b, acc[i][j]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      _mm256_storeu_ps(out + i * ldy + 8 * j, acc[i][j]);
    }
  }
}

using TileFn = void (*)(const float*, const int64_t*, int64_t, const float*,
                        const float*, float*, int64_t);

template <int M, int NV>
constexpr TileFn TileFnFor() {
  if constexpr (M * NV <= 12) {
    return &ForwardTile<M, NV>;
  } else {
    return nullptr;
  }
}

template <int M>
constexpr std::array<TileFn, 5> TileFnRow() {
  return {nullptr, TileFnFor<M, 1>(), TileFnFor<M, 2>(), TileFnFor<M, 3>(),
          TileFnFor<M, 4>()};
}

// kTileFns[M][NV]: every tile with M <= 6 channels, NV <= 4 vectors and at
// most 12 accumulators.
inline constexpr std::array<std::array<TileFn, 5>, 7> kTileFns = {
    {{},
     TileFnRow<1>(),
     TileFnRow<2>(),
     TileFnRow<3>(),
     TileFnRow<4>(),
     TileFnRow<5>(),
     TileFnRow<6>()}};

struct TileShape {
  int m;   // output channels per tile
  int nv;  // vectors of 8 positions per tile
};

// Cycles per filter tap of an m x nv tile on a core with 2 FMA and 2 load
// ports and an FMA latency of 4 (each accumulator waits for its last FMA).
inline double TapCycles(int64_t m, int64_t nv) {
  return std::max({m * nv / 2.0, (m + nv) / 2.0, 4.0});
}

// The tile shape with the fewest modelled cycles for `rows` rows over runs
// of `span` positions, counting the partial row block and the rounding of
// the span to whole tiles (e.g. 16 rows run as 4 x 3 tiles, 3 rows as 3 x 4).
inline TileShape ChooseTiles(int64_t rows, int64_t span) {
  constexpr TileShape kCandidates[] = {{6, 2}, {4, 3}, {3, 4}};
  span = std::max<int64_t>(span, 8);
  TileShape best = kCandidates[0];
  double best_cost = 1e300;
  for (const TileShape& t : kCandidates) {
    const int64_t width = 8 * t.nv;
    double cost = 0;
    for (int64_t o = 0; o < rows; o += t.m) {
      cost += TapCycles(std::min<int64_t>(t.m, rows - o), t.nv);
    }
    cost *= (span + width - 1) / width;
    if (cost < best_cost) best_cost = cost, best = t;
  }
  return best;
}

// All row blocks of one tile column of width 8*nv: rows [o, o+m) use
// packed + o*kk (laid out [k][m]) and write out + o*ld.
inline void RunTiles(int64_t rows, int block_m, int nv, const float* x,
                     const int64_t* off, int64_t kk, const float* packed,
                     const float* bias, float* out, int64_t ld) {
  for (int64_t o = 0; o < rows; o += block_m) {
    const int m = std::min<int64_t>(block_m, rows - o);
    kTileFns[m][nv](x, off, kk, packed + o * kk, bias ? bias + o : nullptr,
                    out + o * ld, ld);
  }
}

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_TILE_H_
