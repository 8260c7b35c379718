#include "kernels/blocked_weights.h"

#include <immintrin.h>

#include "common/logging.h"
#include "kernels/parallel.h"
#include "kernels/transpose8.h"

namespace cohort {
namespace {

// The 8 x 8 floats at rows src, src + src_stride, ... transposed into rows
// dst, dst + dst_stride, ...
inline void Transpose8x8(const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
  Transpose8(r);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * dst_stride, r[i]);
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
  ParallelItems(out_blocks, ItemGrain(block * in),
                [&](int64_t first, int64_t last) {
                  for (int64_t ob = first; ob < last; ++ob) {
                    for (int64_t ib = 0; ib < in_blocks; ++ib) {
                      OnePointPair(src, in, block, ob, ib, dst);
                    }
                  }
                });
}

}  // namespace cohort
