#include "kernels/low_rank.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(LowRank, ColumnsComeOutOrthonormal) {
  const int64_t rows = 37;
  const int cols = 4;
  std::vector<float> m(rows * cols);
  // Full rank (a sine of i alone would give rank 2).
  for (int64_t i = 0; i < rows * cols; ++i) {
    m[i] = std::sin(0.37 * i * i + 0.3);
  }
  OrthogonalizeColumns(m.data(), rows, cols, 0);
  for (int a = 0; a < cols; ++a) {
    for (int b = 0; b < cols; ++b) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r)
        dot += m[r * cols + a] * m[r * cols + b];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-6) << a << " " << b;
    }
  }
}

// The first column keeps its direction (Gram-Schmidt, not Householder).
TEST(LowRank, FirstColumnIsTheNormalisedInput) {
  std::vector<float> m = {3, 1, 4, 1};  // 2 x 2
  OrthogonalizeColumns(m.data(), 2, 2, 0);
  EXPECT_FLOAT_EQ(m[0], 0.6f);
  EXPECT_FLOAT_EQ(m[2], 0.8f);
  EXPECT_NEAR(m[0] * m[1] + m[2] * m[3], 0, 1e-6);
}

TEST(LowRank, ZeroColumnStaysZeroInsteadOfNaN) {
  std::vector<float> m = {0, 1, 0, 2, 0, 3};  // 3 x 2, first column zero
  OrthogonalizeColumns(m.data(), 3, 2, 0);
  for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(m[r * 2], 0.0f);
  EXPECT_NEAR(m[1], 1 / std::sqrt(14.0), 1e-7);
}

}  // namespace
}  // namespace cohort
