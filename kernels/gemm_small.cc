#include "kernels/gemm_small.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

namespace cohort {
namespace gemm_internal {
namespace {

// Mask of the first `n` (0..8) lanes.
__m256i FirstLanes(int64_t n) {
  static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                     0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n));
}

// C[i][0..8*NV) (+)= sum_k A(i, k) * B[k][0..8*NV) for i < MR, where
// A(i, k) = a[i * sa_m + k * sa_k] covers both A and A^T. When kMasked the
// last vector has only `last_cols` columns and uses masked loads and
// stores (slower, so full blocks do without).
template <int MR, int NV, bool kMasked>
void BroadcastTile(const float* a, int64_t sa_m, int64_t sa_k, const float* b,
                   int64_t ldb, int64_t k, bool accumulate, int64_t last_cols,
                   float* c, int64_t ldc) {
  const __m256i last = FirstLanes(kMasked ? last_cols : 8);
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      acc[i][j] = !accumulate ? _mm256_setzero_ps()
                  : (kMasked && j + 1 == NV)
                      ? _mm256_maskload_ps(c + i * ldc + 8 * j, last)
                      : _mm256_loadu_ps(c + i * ldc + 8 * j);
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      bv[j] = (kMasked && j + 1 == NV) ? _mm256_maskload_ps(bp + 8 * j, last)
                                       : _mm256_loadu_ps(bp + 8 * j);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * sa_m + p * sa_k);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if (kMasked && j + 1 == NV) {
        _mm256_maskstore_ps(c + i * ldc + 8 * j, last, acc[i][j]);
      } else {
        _mm256_storeu_ps(c + i * ldc + 8 * j, acc[i][j]);
      }
    }
  }
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// C[i][j] (+)= sum_k A[i][k] * B[j][k] for i < MR, j < NR: 8-lane partial
// dot products, the last vector of k masked, one horizontal sum each.
template <int MR, int NR>
void DotTile(const float* a, int64_t lda, const float* b, int64_t ldb,
             int64_t k, bool accumulate, float* c, int64_t ldc) {
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  auto step = [&](int64_t p, __m256i mask, bool masked) {
    __m256 bv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      bv[j] = masked ? _mm256_maskload_ps(b + j * ldb + p, mask)
                     : _mm256_loadu_ps(b + j * ldb + p);
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 av = masked ? _mm256_maskload_ps(a + i * lda + p, mask)
                               : _mm256_loadu_ps(a + i * lda + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) {
        acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
      }
    }
  };
  const int64_t full = k / 8 * 8;
  for (int64_t p = 0; p < full; p += 8) step(p, __m256i(), false);
  if (full < k) step(full, FirstLanes(k - full), true);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      const float s = HorizontalSum(acc[i][j]);
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
    }
  }
}

using BroadcastFn = void (*)(const float*, int64_t, int64_t, const float*,
                             int64_t, int64_t, bool, int64_t, float*, int64_t);

template <int MR>
constexpr std::array<BroadcastFn, 4> BroadcastRow(bool masked) {
  return masked
             ? std::array<BroadcastFn, 4>{nullptr, &BroadcastTile<MR, 1, true>,
                                          &BroadcastTile<MR, 2, true>,
                                          &BroadcastTile<MR, 3, true>}
             : std::array<BroadcastFn, 4>{nullptr, &BroadcastTile<MR, 1, false>,
                                          &BroadcastTile<MR, 2, false>,
                                          &BroadcastTile<MR, 3, false>};
}

// kBroadcastFns[masked][MR][NV].
constexpr std::array<std::array<std::array<BroadcastFn, 4>, 5>, 2>
    kBroadcastFns = {{{{{},
                        BroadcastRow<1>(false),
                        BroadcastRow<2>(false),
                        BroadcastRow<3>(false),
                        BroadcastRow<4>(false)}},
                      {{{},
                        BroadcastRow<1>(true),
                        BroadcastRow<2>(true),
                        BroadcastRow<3>(true),
                        BroadcastRow<4>(true)}}}};

// C = op(A) B: tiles of 4 rows x 3 vectors (12 accumulators), the last
// column block narrower and masked. panel(j0, cols) gives the columns
// [j0, j0 + cols) of B as {first element of row 0, row stride}.
template <typename PanelFn>
void BroadcastPanels(int64_t m, int64_t n, int64_t k, const float* a,
                     int64_t sa_m, int64_t sa_k, const PanelFn& panel,
                     bool accumulate, float* c, int64_t ldc) {
  constexpr int kRows = 4;
  static_assert(kPanelColumns == 8 * 3, "a panel is one tile wide");
  for (int64_t j0 = 0; j0 < n; j0 += kPanelColumns) {
    const int64_t cols = std::min<int64_t>(kPanelColumns, n - j0);
    const int nv = static_cast<int>((cols + 7) / 8);
    const bool masked = cols % 8 != 0;
    const auto [b, ldb] = panel(j0, cols);
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
      const int mr = std::min<int64_t>(kRows, m - i0);
      kBroadcastFns[masked][mr][nv](a + i0 * sa_m, sa_m, sa_k, b, ldb, k,
                                    accumulate, cols - 8 * (nv - 1),
                                    c + i0 * ldc + j0, ldc);
    }
  }
}

void BroadcastGemm(int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t sa_m, int64_t sa_k, const float* b, int64_t ldb,
                   bool accumulate, float* c, int64_t ldc) {
  BroadcastPanels(
      m, n, k, a, sa_m, sa_k,
      [&](int64_t j0, int64_t) { return std::pair(b + j0, ldb); }, accumulate,
      c, ldc);
}

using DotFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t,
                       bool, float*, int64_t);

template <int MR>
constexpr std::array<DotFn, 4> DotRow() {
  return {nullptr, &DotTile<MR, 1>, &DotTile<MR, 2>, &DotTile<MR, 3>};
}

constexpr std::array<std::array<DotFn, 4>, 5> kDotFns = {
    {{}, DotRow<1>(), DotRow<2>(), DotRow<3>(), DotRow<4>()}};

// C = A B^T: tiles of 4 rows of A x 3 rows of B.
void DotGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
             const float* b, int64_t ldb, bool accumulate, float* c,
             int64_t ldc) {
  constexpr int kRows = 4, kCols = 3;
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    const int mr = std::min<int64_t>(kRows, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kCols) {
      const int nr = std::min<int64_t>(kCols, n - j0);
      kDotFns[mr][nr](a + i0 * lda, lda, b + j0 * ldb, ldb, k, accumulate,
                      c + i0 * ldc + j0, ldc);
    }
  }
}

}  // namespace

bool SmallSgemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
                const float* a, int64_t lda, const float* b, int64_t ldb,
                bool accumulate, float* c, int64_t ldc) {
  if (trans_b == Trans::kNo) {
    const bool ta = trans_a == Trans::kYes;
    BroadcastGemm(m, n, k, a, ta ? 1 : lda, ta ? lda : 1, b, ldb, accumulate, c,
                  ldc);
    return true;
  }
  if (trans_a == Trans::kNo) {
    DotGemm(m, n, k, a, lda, b, ldb, accumulate, c, ldc);
    return true;
  }
  return false;
}

}  // namespace gemm_internal

void PanelSgemm(Trans trans_a, int64_t m, int64_t n, int64_t k, const float* a,
                int64_t lda, const float* b_panels, bool accumulate, float* c,
                int64_t ldc) {
  const bool ta = trans_a == Trans::kYes;
  gemm_internal::BroadcastPanels(
      m, n, k, a, ta ? 1 : lda, ta ? lda : 1,
      [&](int64_t j0, int64_t cols) {
        return std::pair(b_panels + j0 * k, cols);
      },
      accumulate, c, ldc);
}

}  // namespace cohort
