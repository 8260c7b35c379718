#include "kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemm_small.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

// C = alpha op(A) op(B) + beta C by the definition, in double.
std::vector<double> NaiveGemm(Trans ta, Trans tb, int64_t m, int64_t n,
                              int64_t k, double alpha,
                              const std::vector<double>& a, int64_t lda,
                              const std::vector<double>& b, int64_t ldb,
                              double beta, std::vector<double> c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta == Trans::kNo ? a[i * lda + p] : a[p * lda + i];
        const double y = tb == Trans::kNo ? b[p * ldb + j] : b[j * ldb + p];
        s += x * y;
      }
      c[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
    }
  }
  return c;
}

template <typename T>
void CheckAllTransposes(double tol) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t m = 7, n = 13, k = 9, ld = 20;  // ld > every dimension
  std::vector<double> a(ld * ld), b(ld * ld), c(ld * ld);
  for (auto* v : {&a, &b, &c}) {
    for (double& x : *v) x = u(rng);
  }
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const auto want =
          NaiveGemm(ta, tb, m, n, k, 0.5, a, ld, b, ld, 2.0, c, ld);
      std::vector<T> ta_(a.begin(), a.end()), tb_(b.begin(), b.end()),
          tc(c.begin(), c.end());
      Gemm<T>(ta, tb, m, n, k, T(0.5), ta_.data(), ld, tb_.data(), ld, T(2),
              tc.data(), ld);
      for (size_t i = 0; i < tc.size(); ++i) {
        EXPECT_NEAR(tc[i], want[i], tol) << i;
      }
    }
  }
}

TEST(Gemm, FloatMatchesDefinitionForAllTransposes) {
  CheckAllTransposes<float>(1e-5);
}

TEST(Gemm, DoubleMatchesDefinitionForAllTransposes) {
  CheckAllTransposes<double>(1e-13);
}

// Small float products with alpha = 1 and beta 0 or 1, through Gemm (the
// in-place kernels where oneDNN's sgemm does not run, oneDNN's where it
// does) and through the in-place kernels directly, so that they stay tested
// on every machine: every handled transpose, row / column / depth
// remainders of their tiles, and leading dimensions wider than the
// matrices.
TEST(Gemm, SmallFloatProductsMatchDefinition) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t shapes[][3] = {{1, 1, 1},   {3, 5, 7},    {10, 200, 100},
                               {13, 27, 9}, {5, 8, 16},   {17, 25, 33},
                               {4, 24, 8},  {9, 49, 200}, {100, 10, 84}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const int64_t ld = std::max({m, n, k}) + 3;
    std::vector<double> a(ld * ld), b(ld * ld), c(m * ld);
    for (auto* v : {&a, &b, &c}) {
      for (double& x : *v) x = u(rng);
    }
    for (Trans ta : {Trans::kNo, Trans::kYes}) {
      for (Trans tb : {Trans::kNo, Trans::kYes}) {
        for (double beta : {0.0, 1.0}) {
          const auto want =
              NaiveGemm(ta, tb, m, n, k, 1.0, a, ld, b, ld, beta, c, ld);
          const std::vector<float> fa(a.begin(), a.end()),
              fb(b.begin(), b.end());
          for (const bool direct : {false, true}) {
            std::vector<float> fc(c.begin(), c.end());
            if (!direct) {
              Gemm<float>(ta, tb, m, n, k, 1.0f, fa.data(), ld, fb.data(), ld,
                          static_cast<float>(beta), fc.data(), ld);
            } else if (!gemm_internal::SmallSgemm(ta, tb, m, n, k, fa.data(),
                                                  ld, fb.data(), ld,
                                                  beta == 1.0, fc.data(), ld)) {
              // Both transposed: not handled, and left to the others.
              ASSERT_TRUE(ta == Trans::kYes && tb == Trans::kYes);
              continue;
            }
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < ld; ++j) {
                // Columns past n must be left alone.
                EXPECT_NEAR(fc[i * ld + j], want[i * ld + j], 1e-5 * (k + 1))
                    << m << "x" << n << "x" << k << " ta " << int(ta) << " tb "
                    << int(tb) << " beta " << beta << " direct " << direct
                    << " at " << i << "," << j;
              }
            }
          }
        }
      }
    }
  }
}

// A random rows x cols matrix whose rows are `cols + 5` apart, so that
// products read their operands through a leading dimension wider than a row.
struct Strided {
  int64_t ld;
  std::vector<double> v;
};

Strided RandomStrided(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  Strided s{cols + 5, std::vector<double>(rows * (cols + 5))};
  for (double& x : s.v) x = u(rng);
  return s;
}

// Products big enough to split over the compute threads: by rows where C is
// taller than wide, by columns otherwise, over the sum where C is small and
// the sum long, with both kernels (small float, OpenBLAS) and split points
// that cut the kernels' tiles. Every thread count gives the one-thread
// result bit for bit, and it is right. Operands are sized to each shape and
// transpose: square ones as wide as the longest dimension cost the test a
// gigabyte of copies for nothing.
template <typename T>
void CheckSplitProducts(double tol) {
  std::mt19937_64 rng(17);
  const int64_t shapes[][3] = {
      {64, 2100, 100}, {2100, 64, 100}, {40, 4099, 70}, {4099, 40, 70},
      {64, 1000, 100}, {1000, 64, 100}, {33, 2050, 64}, {250, 257, 600},
      {96, 100, 2100}, {100, 96, 2100}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    for (Trans ta : {Trans::kNo, Trans::kYes}) {
      for (Trans tb : {Trans::kNo, Trans::kYes}) {
        const bool at = ta == Trans::kYes, bt = tb == Trans::kYes;
        const Strided a = RandomStrided(at ? k : m, at ? m : k, rng);
        const Strided b = RandomStrided(bt ? n : k, bt ? k : n, rng);
        const Strided c = RandomStrided(m, n, rng);
        const double beta = bt ? 1.0 : 0.0;
        const auto want = NaiveGemm(ta, tb, m, n, k, 1.0, a.v, a.ld, b.v, b.ld,
                                    beta, c.v, c.ld);
        const std::vector<T> ta_(a.v.begin(), a.v.end()),
            tb_(b.v.begin(), b.v.end());
        std::vector<T> first;
        for (int threads : {1, 2, 3, 4}) {
          SetOnednnThreads(threads);
          std::vector<T> tc(c.v.begin(), c.v.end());
          Gemm<T>(ta, tb, m, n, k, T(1), ta_.data(), a.ld, tb_.data(), b.ld,
                  T(beta), tc.data(), c.ld);
          if (threads == 1) {
            first = tc;
            for (size_t i = 0; i < tc.size(); ++i) {
              ASSERT_NEAR(tc[i], want[i], tol * k) << m << "x" << n << "x" << k;
            }
          } else {
            ASSERT_EQ(tc, first)
                << m << "x" << n << "x" << k << " ta " << int(ta) << " tb "
                << int(tb) << " at " << threads << " threads";
          }
        }
      }
    }
  }
  SetOnednnThreads(0);
}

TEST(Gemm, FloatSplitProductsDoNotDependOnThreadCount) {
  CheckSplitProducts<float>(1e-6);
}

TEST(Gemm, DoubleSplitProductsDoNotDependOnThreadCount) {
  CheckSplitProducts<double>(1e-14);
}

// B packed in panels gives the bits of Gemm on B in place: widths that end
// a panel early, in the middle of a vector and on a whole one, A either way,
// C overwritten or added to.
// A transformer's second position-wise product (tokens x width x 4 width,
// weights transposed) with packed rows: oneDNN's own threads cut its sum
// and changed most of its results between one and two threads.
TEST(Gemm, PackedTransformerProductDoesNotDependOnThreadCount) {
  const int64_t m = 512, n = 256, k = 1024;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(m * k), b(n * k);
  for (auto* v : {&a, &b}) {
    for (float& x : *v) x = u(rng);
  }
  std::vector<float> first;
  for (int threads : {1, 2, 3, 4}) {
    SetOnednnThreads(threads);
    std::vector<float> c(m * n);
    Gemm<float>(Trans::kNo, Trans::kYes, m, n, k, 1.0f, a.data(), k, b.data(),
                k, 0.0f, c.data(), n);
    if (threads == 1) {
      first = c;
      for (int64_t i = 0; i < m; i += 61) {
        for (int64_t j = 0; j < n; j += 17) {
          double want = 0;
          for (int64_t p = 0; p < k; ++p) {
            want += double{a[i * k + p]} * b[j * k + p];
          }
          ASSERT_NEAR(c[i * n + j], want, 1e-4) << i << "," << j;
        }
      }
    } else {
      ASSERT_EQ(c, first) << "at " << threads << " threads";
    }
  }
  SetOnednnThreads(0);
}

TEST(PanelSgemm, MatchesGemmOnUnpackedOperands) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t shapes[][3] = {{1, 1, 1},    {7, 24, 5},    {32, 64, 64},
                               {13, 50, 33}, {4, 48, 256},  {9, 17, 3},
                               {5, 72, 100}, {33, 200, 17}, {2, 8, 512}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const int64_t ld = std::max({m, n, k}) + 3;
    std::vector<float> a(ld * ld), b(k * n), c(m * ld), panels(k * n);
    for (auto* v : {&a, &b, &c}) {
      for (float& x : *v) x = u(rng);
    }
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        panels[PanelOffset(n, k, r, j)] = b[r * n + j];
      }
    }
    for (Trans ta : {Trans::kNo, Trans::kYes}) {
      for (bool accumulate : {false, true}) {
        std::vector<float> want = c, got = c;
        Gemm<float>(ta, Trans::kNo, m, n, k, 1.0f, a.data(), ld, b.data(), n,
                    accumulate ? 1.0f : 0.0f, want.data(), ld);
        PanelSgemm(ta, m, n, k, a.data(), ld, panels.data(), accumulate,
                   got.data(), ld);
        EXPECT_EQ(got, want) << m << "x" << n << "x" << k << " ta " << int(ta)
                             << " accumulate " << accumulate;
      }
    }
  }
}

TEST(Gemm, BetaZeroIgnoresGarbageInC) {
  const float a[2] = {1, 2}, b[2] = {3, 4};
  float c[1] = {std::nanf("")};
  Gemm<float>(Trans::kNo, Trans::kNo, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, c, 1);
  EXPECT_EQ(c[0], 11.0f);
}

TEST(Gemm, EmptyInnerDimensionGivesZero) {
  float c[2] = {5, 6};
  Gemm<float>(Trans::kNo, Trans::kNo, 1, 2, 0, 1.0f, nullptr, 1, nullptr, 2,
              0.0f, c, 2);
  EXPECT_EQ(c[0], 0.0f);
  EXPECT_EQ(c[1], 0.0f);
}

TEST(Reductions, RowAndColumnSums) {
  // 2 x 19 with a row stride of 20: the vector loop and its tail both run.
  std::vector<float> a(40);
  for (int i = 0; i < 40; ++i) a[i] = static_cast<float>(i % 20);
  float rows[2], cols[19];
  RowSums<float>(2, 19, a.data(), 20, rows);
  EXPECT_EQ(rows[0], 171.0f);  // 0 + 1 + ... + 18
  EXPECT_EQ(rows[1], 171.0f);
  ColumnSums<float>(2, 19, a.data(), 20, cols);
  for (int j = 0; j < 19; ++j) EXPECT_EQ(cols[j], 2.0f * j);
  double drows[1];
  const double d[3] = {1.5, 2.5, -1};
  RowSums<double>(1, 3, d, 3, drows);
  EXPECT_EQ(drows[0], 3.0);
}

TEST(Reductions, BroadcastRowFillsEveryRow) {
  const float row[3] = {1, 2, 3};
  float c[8] = {};
  BroadcastRow<float>(2, 3, row, c, 4);
  const float want[8] = {1, 2, 3, 0, 1, 2, 3, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c[i], want[i]) << i;
}

}  // namespace
}  // namespace cohort
