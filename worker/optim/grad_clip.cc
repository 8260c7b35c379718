#include "worker/optim/grad_clip.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/prefetch.h"

namespace cohort {
namespace {

// Sixteen running sums in four vectors of doubles: independent
// multiply-adds that keep both of a core's FMA units busy, where scalar
// code (which the compiler may not reorder into vectors) ran at a quarter
// of the memory's speed. The lanes are added in a fixed order. A single
// stream that is only read runs at half the memory's speed without the
// prefetch (kernels/prefetch.h).
double ChunkSumOfSquares(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    PrefetchAhead(x + i);
    for (int k = 0; k < 2; ++k) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      acc[2 * k] = _mm256_fmadd_pd(lo, lo, acc[2 * k]);
      acc[2 * k + 1] = _mm256_fmadd_pd(hi, hi, acc[2 * k + 1]);
    }
  }
  const __m256d sum = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]),
                                    _mm256_add_pd(acc[2], acc[3]));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  double total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  return total;
}

}  // namespace

// Chunks of a fixed size, summed in order: the compute threads share the
// chunks and the result does not depend on how many there are.
constexpr int64_t kChunk = int64_t{1} << 16;

double SumOfSquares(const float* x, int64_t n) {
  ChunkSquares squares;
  squares.Start(x, n);
  return squares.Total();
}

void ChunkSquares::Start(const float* x, int64_t n) {
  x_ = x;
  n_ = n;
  pending_ = (n + kChunk - 1) / kChunk;
  partial_.assign(pending_, 0.0);
}

void ChunkSquares::Final(int64_t offset) {
  const int64_t first = std::max<int64_t>(0, (offset + kChunk - 1) / kChunk);
  // Chunks wait until there are enough to share among the threads: a
  // parallel region per chunk cost more than reading it from memory later.
  if (pending_ - first >= kChunksAtOnce) SumFrom(first);
}

void ChunkSquares::SumFrom(int64_t first) {
  if (first >= pending_) return;
  ParallelItems(pending_ - first, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = first + begin; c < first + end; ++c) {
      partial_[c] =
          ChunkSumOfSquares(x_ + c * kChunk, std::min(kChunk, n_ - c * kChunk));
    }
  });
  pending_ = first;
}

double ChunkSquares::Total() {
  SumFrom(0);
  double total = 0;
  for (double p : partial_) total += p;
  return total;
}

float ClipScale(const std::vector<double>& squares, double max_norm) {
  double total = 0;
  for (double s : squares) total += s;
  const double norm = std::sqrt(total);
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

}  // namespace cohort
