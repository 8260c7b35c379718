#include "worker/optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/parallel.h"

namespace cohort {
namespace {

double ChunkSumOfSquares(const float* x, int64_t n) {
  // Four running sums: independent adds the compiler can keep in flight.
  double acc[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) {
      acc[k] += static_cast<double>(x[i + k]) * x[i + k];
    }
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * x[i];
  return acc[0] + acc[1] + acc[2] + acc[3];
}

}  // namespace

// Chunks of a fixed size, summed in order: the compute threads share the
// chunks and the result does not depend on how many there are.
double SumOfSquares(const float* x, int64_t n) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) return ChunkSumOfSquares(x, n);
  std::vector<double> partial(chunks);
  ParallelItems(chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      partial[c] =
          ChunkSumOfSquares(x + c * kChunk, std::min(kChunk, n - c * kChunk));
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

float ClipScale(const std::vector<double>& squares, double max_norm) {
  double total = 0;
  for (double s : squares) total += s;
  const double norm = std::sqrt(total);
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

}  // namespace cohort
