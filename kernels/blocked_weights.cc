#include "kernels/blocked_weights.h"

#include <immintrin.h>

#include "common/logging.h"
#include "kernels/parallel.h"

namespace cohort {
namespace {

// The 8 x 8 floats at rows src, src + src_stride, ... transposed into rows
// dst, dst + dst_stride, ...
inline void Transpose8x8(const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
  const __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
  const __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
  const __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
  const __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  const __m256 out[8] = {_mm256_permute2f128_ps(s0, s4, 0x20),
                         _mm256_permute2f128_ps(s1, s5, 0x20),
                         _mm256_permute2f128_ps(s2, s6, 0x20),
                         _mm256_permute2f128_ps(s3, s7, 0x20),
                         _mm256_permute2f128_ps(s0, s4, 0x31),
                         _mm256_permute2f128_ps(s1, s5, 0x31),
                         _mm256_permute2f128_ps(s2, s6, 0x31),
                         _mm256_permute2f128_ps(s3, s7, 0x31)};
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * dst_stride, out[i]);
}

// Output block ob, input block ib: one block x block tile, transposed
// straight into the output rows in 8 x 8 pieces.
void OnePointPair(const float* src, int64_t in, int64_t block, int64_t ob,
                  int64_t ib, float* dst) {
  const float* tile = src + (ob * (in / block) + ib) * block * block;
  float* rows = dst + ob * block * in + ib * block;
  for (int64_t ii = 0; ii < block; ii += 8) {
    for (int64_t oo = 0; oo < block; oo += 8) {
      Transpose8x8(tile + ii * block + oo, block, rows + oo * in + ii, in);
    }
  }
}

}  // namespace

void FromBlockedWeights(const float* src, int64_t out, int64_t in,
                        int64_t block, float* dst) {
  CHECK(block % 8 == 0 && out % block == 0 && in % block == 0)
      << out << " x " << in << " weights in blocks of " << block;
  const int64_t out_blocks = out / block, in_blocks = in / block;
  const int64_t per_block = block * in;
  ParallelItems(out_blocks, (kElementwiseGrain + per_block - 1) / per_block,
                [&](int64_t first, int64_t last) {
                  for (int64_t ob = first; ob < last; ++ob) {
                    for (int64_t ib = 0; ib < in_blocks; ++ib) {
                      OnePointPair(src, in, block, ob, ib, dst);
                    }
                  }
                });
}

}  // namespace cohort
