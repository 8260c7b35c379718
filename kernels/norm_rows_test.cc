#include "kernels/norm_rows.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Rows of every length up to two loop steps and a tail, and a long one;
// values with a large common offset, where a sum that lost the deviations'
// precision would show.
template <typename T>
std::vector<T> Row(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(3.0, 1.5);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

std::vector<int64_t> Lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 40; ++i) n.push_back(i);
  n.push_back(8192 + 5);
  return n;
}

bool Near(double got, double want, double scale) {
  return std::abs(got - want) <= 1e-12 * std::max(1.0, scale);
}

template <typename T>
void CheckSums() {
  for (int64_t n : Lengths()) {
    SCOPED_TRACE(n);
    const std::vector<T> x = Row<T>(n, 1), dy = Row<T>(n, 2), w = Row<T>(n, 3);
    const double mean = 2.5, invstd = 0.7;
    double sum = 0, dev = 0, g = 0, g_xh = 0, gw = 0, gw_xh = 0, abs = 0;
    std::vector<double> dw_want(n, 0.25), db_want(n, -0.5);
    for (int64_t i = 0; i < n; ++i) {
      const double xh = (x[i] - mean) * invstd;
      sum += x[i];
      dev += (x[i] - mean) * (x[i] - mean);
      g += dy[i];
      g_xh += dy[i] * xh;
      gw += static_cast<double>(dy[i]) * w[i];
      gw_xh += static_cast<double>(dy[i]) * w[i] * xh;
      dw_want[i] += dy[i] * xh;
      db_want[i] += dy[i];
      abs += std::abs(x[i]) +
             std::abs(dy[i]) * (1 + std::abs(xh)) * (1 + std::abs(w[i]));
    }
    EXPECT_TRUE(Near(RowSum(x.data(), n), sum, abs));
    EXPECT_TRUE(Near(RowSquaredDeviations(x.data(), n, mean), dev, abs * abs));
    const RowGradSums s = RowGradientSums(x.data(), dy.data(), n, mean, invstd);
    EXPECT_TRUE(Near(s.g, g, abs));
    EXPECT_TRUE(Near(s.g_xh, g_xh, abs));
    std::vector<double> dw(n, 0.25), db(n, -0.5);
    const RowGradSums p = RowGradientSumsPerElement(
        x.data(), dy.data(), w.data(), n, mean, invstd, dw.data(), db.data());
    EXPECT_TRUE(Near(p.g, gw, abs));
    EXPECT_TRUE(Near(p.g_xh, gw_xh, abs));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(Near(dw[i], dw_want[i], 1.0)) << i;
      ASSERT_TRUE(Near(db[i], db_want[i], 1.0)) << i;
    }
  }
}

TEST(NormRows, FloatSumsMatchPlainLoops) { CheckSums<float>(); }
TEST(NormRows, DoubleSumsMatchPlainLoops) { CheckSums<double>(); }

// The same row gives the same bits wherever it lies in memory: the sums do
// not depend on alignment.
TEST(NormRows, SumsDoNotDependOnAlignment) {
  const std::vector<float> row = Row<float>(100, 4);
  std::vector<float> shifted(row.size() + 3);
  std::copy(row.begin(), row.end(), shifted.begin() + 3);
  EXPECT_EQ(RowSum(row.data(), 100), RowSum(shifted.data() + 3, 100));
  EXPECT_EQ(RowSquaredDeviations(row.data(), 100, 1.0),
            RowSquaredDeviations(shifted.data() + 3, 100, 1.0));
}

}  // namespace
}  // namespace cohort
