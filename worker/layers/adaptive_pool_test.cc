// AdaptiveAvgPool2d: PyTorch's window bounds, values on a hand-checked
// input, gradients against finite differences (overlapping windows and an
// output larger than the input) and the refusals of Configure. Its
// agreement with PyTorch is tests/layers_torch_test.
#include "worker/layers/adaptive_pool.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

TEST(AdaptiveAvgPool2d, WindowsFollowPyTorchsFloorCeilRule) {
  // 5 -> 3: [0, 2), [1, 4), [3, 5); they overlap and differ in size.
  EXPECT_EQ(AdaptiveBegin(0, 5, 3), 0);
  EXPECT_EQ(AdaptiveEnd(0, 5, 3), 2);
  EXPECT_EQ(AdaptiveBegin(1, 5, 3), 1);
  EXPECT_EQ(AdaptiveEnd(1, 5, 3), 4);
  EXPECT_EQ(AdaptiveBegin(2, 5, 3), 3);
  EXPECT_EQ(AdaptiveEnd(2, 5, 3), 5);
  // 2 -> 5: rows repeat, and the middle window still holds both.
  const int64_t begin[5] = {0, 0, 0, 1, 1}, end[5] = {1, 1, 2, 2, 2};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(AdaptiveBegin(i, 2, 5), begin[i]) << i;
    EXPECT_EQ(AdaptiveEnd(i, 2, 5), end[i]) << i;
  }
}

// The GPU's backward gathers each input's gradient from the outputs that
// cover it: exactly the windows that hold it, for every size pair.
TEST(AdaptiveAvgPool2d, CoveringOutputsAreExactlyTheWindowsHoldingAnIndex) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t out = 1; out <= 12; ++out) {
      for (int64_t x = 0; x < in; ++x) {
        const int64_t first = AdaptiveFirstCover(x, in, out);
        const int64_t last = AdaptiveLastCover(x, in, out);
        for (int64_t i = 0; i < out; ++i) {
          const bool holds =
              AdaptiveBegin(i, in, out) <= x && x < AdaptiveEnd(i, in, out);
          EXPECT_EQ(holds, first <= i && i <= last)
              << "in " << in << ", out " << out << ", x " << x << ", i " << i;
        }
      }
    }
  }
}

TEST(AdaptiveAvgPool2d, ValuesAreWindowMeans) {
  // One channel, two samples of 3x4 (batch-inner {C, N, H, W}).
  TensorD in({1, 2, 3, 4});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i);
  AdaptiveAvgPool2d<double> pool(2);
  const absl::StatusOr<Shape> out_shape = pool.Configure({1, 3, 4});
  ASSERT_TRUE(out_shape.ok()) << out_shape.status();
  EXPECT_EQ(*out_shape, (Shape{1, 2, 2}));
  TensorD out;
  pool.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2, 2}));
  // Rows [0, 2) and [1, 3), columns [0, 2) and [2, 4): cell (i, j) of the
  // first sample averages 4i + 2j + {0, 1, 4, 5}, the second adds 12.
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const double want = 12.0 * n + 4.0 * i + 2.0 * j + 2.5;
        EXPECT_DOUBLE_EQ(out[(n * 2 + i) * 2 + j], want) << n << i << j;
      }
    }
  }
}

TEST(AdaptiveAvgPool2d, GradientsMatchFiniteDifferences) {
  const struct {
    int64_t output;
    Shape in;
  } cases[] = {
      {1, {3, 4, 5}}, {3, {2, 7, 7}}, {3, {2, 5, 8}},
      {2, {2, 4, 4}}, {5, {2, 2, 3}}, {4, {1, 1, 6}},
  };
  for (const auto& c : cases) {
    AdaptiveAvgPool2d<double> pool(c.output);
    const absl::Status s =
        CheckLayerGradients(pool, c.in, {c.in[0], 3, c.in[1], c.in[2]});
    EXPECT_TRUE(s.ok()) << pool.Name() << " on " << ShapeString(c.in) << ": "
                        << s;
  }
}

TEST(AdaptiveAvgPool2d, FloatMatchesDouble) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 1);
  TensorD xd({2, 3, 5, 8});
  Tensor xf({2, 3, 5, 8});
  for (int64_t i = 0; i < xd.size(); ++i) {
    xf[i] = static_cast<float>(xd[i] = normal(rng));
  }
  AdaptiveAvgPool2d<double> d(3);
  AdaptiveAvgPool2d<float> f(3);
  ASSERT_TRUE(d.Configure({2, 5, 8}).ok());
  ASSERT_TRUE(f.Configure({2, 5, 8}).ok());
  TensorD yd, gd;
  Tensor yf, gf;
  d.Forward(xd, &yd, Mode::kTrain);
  f.Forward(xf, &yf, Mode::kTrain);
  d.Backward(yd, &gd);  // any upstream gradient will do
  f.Backward(yf, &gf);
  for (int64_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-6);
  for (int64_t i = 0; i < gd.size(); ++i) EXPECT_NEAR(gf[i], gd[i], 1e-6);
}

TEST(AdaptiveAvgPool2d, ConfigureRefusesWhatDoesNotFit) {
  AdaptiveAvgPool2d<float> pool(2);
  EXPECT_FALSE(pool.Configure({3, 8}).ok());
  EXPECT_FALSE(pool.Configure({12}).ok());
  EXPECT_FALSE(pool.Configure({3, 0, 4}).ok());
  AdaptiveAvgPool2d<float> zero(0);
  const absl::Status s = zero.Configure({3, 4, 4}).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("adaptive_avgpool2d"), std::string::npos) << s;
}

}  // namespace
}  // namespace cohort
