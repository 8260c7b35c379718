#include "worker/optim/grad_clip.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

// Longer than one chunk, not a multiple of one, so that the threads share
// chunks and the last is short.
std::vector<float> Gradient() {
  std::vector<float> g((int64_t{1} << 20) + 12345);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] =
        static_cast<float>((static_cast<int64_t>(i) * 7919) % 1013) * 0.001f -
        0.5f;
  }
  return g;
}

TEST(SumOfSquares, MatchesLongDoubleAndNotTheThreadCount) {
  const std::vector<float> g = Gradient();
  long double want = 0;
  for (float x : g) want += static_cast<long double>(x) * x;
  double by_threads[2];
  for (int threads : {1, 2}) {
    SetOnednnThreads(threads);
    by_threads[threads - 1] =
        SumOfSquares(g.data(), static_cast<int64_t>(g.size()));
  }
  SetOnednnThreads(0);
  EXPECT_EQ(by_threads[0], by_threads[1]);
  EXPECT_NEAR(by_threads[0], static_cast<double>(want), 1e-12 * want);
}

TEST(SumOfSquares, ShortAndEmpty) {
  const float x[] = {1.0f, -2.0f, 3.0f, 0.5f, -0.5f};
  EXPECT_EQ(SumOfSquares(x, 5), 14.5);
  EXPECT_EQ(SumOfSquares(x, 0), 0.0);
}

// Ranges made final from the back in uneven steps, at chunk boundaries and
// inside chunks, with repeats and an offset that goes back up (ignored):
// the total is SumOfSquares's, bit for bit, at one thread and at two.
TEST(ChunkSquares, RangesFromTheBackGiveSumOfSquaresBits) {
  const std::vector<float> g = Gradient();
  const int64_t n = static_cast<int64_t>(g.size());
  const double want = SumOfSquares(g.data(), n);
  const int64_t chunk = int64_t{1} << 16;
  for (int threads : {1, 2}) {
    SetOnednnThreads(threads);
    ChunkSquares squares;
    squares.Start(g.data(), n);
    for (int64_t offset : {n, n - 100, 12 * chunk + 7, 12 * chunk + 7,
                           9 * chunk, 11 * chunk, 3 * chunk - 1, int64_t{5}}) {
      squares.Final(offset);
    }
    EXPECT_EQ(squares.Total(), want) << threads << " threads";
    squares.Start(g.data(), n);  // nothing final before Total
    EXPECT_EQ(squares.Total(), want) << threads << " threads";
  }
  SetOnednnThreads(0);
}

// A gradient with an infinity or a NaN sums to a value that is not finite,
// wherever it lies and whenever its chunk was summed.
TEST(ChunkSquares, NonFiniteElementsMakeANonFiniteTotal) {
  std::vector<float> g = Gradient();
  const int64_t n = static_cast<int64_t>(g.size());
  for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
    for (float bad : {INFINITY, NAN}) {
      std::vector<float> x = g;
      x[at] = bad;
      ChunkSquares squares;
      squares.Start(x.data(), n);
      squares.Final(n / 3);
      EXPECT_FALSE(std::isfinite(squares.Total())) << at;
    }
  }
}

}  // namespace
}  // namespace cohort
