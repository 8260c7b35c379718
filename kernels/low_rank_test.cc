#include "kernels/low_rank.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::vector<float> Values(int64_t n, double seed) {
  std::vector<float> v(n);
  // Full rank (a sine of i alone would give rank 2).
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.37 * i * i + seed);
  return v;
}

TEST(LowRank, RowsComeOutOrthonormal) {
  const int count = 4;
  const int64_t length = 37;
  std::vector<float> m = Values(count * length, 0.3);
  OrthogonalizeRows(m.data(), count, length, 0);
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < length; ++i) {
        dot += m[a * length + i] * m[b * length + i];
      }
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-6) << a << " " << b;
    }
  }
}

// The first row keeps its direction (Gram-Schmidt, not Householder).
TEST(LowRank, FirstRowIsTheNormalisedInput) {
  std::vector<float> m = {3, 4, 1, 1};  // 2 rows of 2
  OrthogonalizeRows(m.data(), 2, 2, 0);
  EXPECT_FLOAT_EQ(m[0], 0.6f);
  EXPECT_FLOAT_EQ(m[1], 0.8f);
  EXPECT_NEAR(m[0] * m[2] + m[1] * m[3], 0, 1e-6);
}

TEST(LowRank, ZeroRowStaysZeroInsteadOfNaN) {
  std::vector<float> m = {0, 0, 0, 1, 2, 3};  // first row zero
  OrthogonalizeRows(m.data(), 2, 3, 0);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(m[i], 0.0f);
  EXPECT_NEAR(m[3], 1 / std::sqrt(14.0), 1e-7);
}

// The three products against plain double loops, over shapes whose rows
// end inside a group of eight lanes and ranks on both sides of four.
TEST(LowRank, ProductsMatchPlainLoops) {
  for (int64_t rows : {1, 5, 16}) {
    for (int64_t cols : {1, 7, 8, 13, 29}) {
      for (int rank : {1, 3, 4, 5, 9}) {
        SCOPED_TRACE(testing::Message() << rows << "x" << cols << " r" << rank);
        const std::vector<float> m = Values(rows * cols, 0.1);
        const std::vector<float> qt = Values(rank * cols, 0.7);
        std::vector<float> pt(rank * rows);
        LowRankProject(m.data(), rows, cols, qt.data(), rank, pt.data());
        for (int k = 0; k < rank; ++k) {
          for (int64_t r = 0; r < rows; ++r) {
            double want = 0;
            for (int64_t c = 0; c < cols; ++c) {
              want += double{m[r * cols + c]} * qt[k * cols + c];
            }
            ASSERT_NEAR(pt[k * rows + r], want, 1e-5);
          }
        }
        std::vector<float> back(rank * cols, 99.0f);
        LowRankProjectBack(m.data(), rows, cols, pt.data(), rank, back.data());
        for (int k = 0; k < rank; ++k) {
          for (int64_t c = 0; c < cols; ++c) {
            double want = 0;
            for (int64_t r = 0; r < rows; ++r) {
              want += double{pt[k * rows + r]} * m[r * cols + c];
            }
            ASSERT_NEAR(back[k * cols + c], want, 1e-4);
          }
        }
        const std::vector<float> input = Values(rows * cols, 0.9);
        std::vector<float> out(rows * cols + 1, 7.0f);
        std::vector<float> error(rows * cols + 1, 7.0f);
        LowRankExpansion x;
        x.scale = 0.5f;
        x.share = 2.0f;
        x.input = input.data();
        x.out = out.data();
        x.error = error.data();
        LowRankExpand(pt.data(), qt.data(), rows, cols, rank, x);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            double want = 0;
            for (int k = 0; k < rank; ++k) {
              want += double{pt[k * rows + r]} * qt[k * cols + c];
            }
            want *= 0.5;
            ASSERT_NEAR(out[r * cols + c], want, 1e-4);
            ASSERT_NEAR(error[r * cols + c], input[r * cols + c] - 2 * want,
                        1e-4);
          }
        }
        // Nothing past the matrix is written.
        EXPECT_EQ(out.back(), 7.0f);
        EXPECT_EQ(error.back(), 7.0f);
      }
    }
  }
}

}  // namespace
}  // namespace cohort
