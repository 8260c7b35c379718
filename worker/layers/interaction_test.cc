// interaction: DLRM's dot interaction and the concatenation against
// hand-computed values, gradients against finite differences, the same bits
// on one and two threads, float against double, and the refusals. Its
// agreement with DLRM's formula in PyTorch is tests/recsys_torch_test.
#include "worker/layers/interaction.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

TEST(Interaction, DotGivesTheFirstVectorThenTheLowerTriangle) {
  // dim 2, T = 2: v0 = (1, 2), v1 = (3, 4), v2 = (5, 6), two samples.
  Interaction<double> layer(InteractionKind::kDot, 2);
  const absl::StatusOr<Shape> out_shape = layer.Configure({6});
  ASSERT_TRUE(out_shape.ok()) << out_shape.status();
  EXPECT_EQ(*out_shape, (Shape{5}));
  EXPECT_EQ(layer.Name(), "interaction(dot, 3 x 2)");
  TensorD x({2, 6});
  for (int i = 0; i < 6; ++i) {
    x[i] = i + 1;
    x[6 + i] = -(i + 1);
  }
  TensorD y;
  layer.Forward(x, &y, Mode::kTrain);
  ASSERT_EQ(y.shape(), (Shape{2, 5}));
  // v0, then (i, j) = (1, 0), (2, 0), (2, 1).
  const double want[] = {1, 2, 11, 17, 39, -1, -2, 11, 17, 39};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(y[i], want[i]) << i;

  TensorD dy({2, 5}), dx;
  const double g[] = {1, -1, 2, 3, 4};
  for (int i = 0; i < 5; ++i) dy[i] = dy[5 + i] = g[i];
  layer.Backward(dy, &dx);
  ASSERT_EQ(dx.shape(), (Shape{2, 6}));
  // dv0 = g0 + 2 v1 + 3 v2, dv1 = 2 v0 + 4 v2, dv2 = 3 v0 + 4 v1.
  const double want_dx[] = {22, 25, 22, 28, 15, 22};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(dx[i], want_dx[i]) << i;
    // The second sample is the first negated: the pairs' part flips sign.
    const double direct = i < 2 ? g[i] : 0;
    EXPECT_EQ(dx[6 + i], -(want_dx[i] - direct) + direct) << i;
  }
}

TEST(Interaction, CatIsTheIdentity) {
  Interaction<float> layer(InteractionKind::kCat, 4);
  ASSERT_EQ(*layer.Configure({12}), (Shape{12}));
  EXPECT_EQ(layer.Name(), "interaction(cat, 3 x 4)");
  Tensor x({3, 12}), y, dx;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.5f * i;
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(x, &dx);
  for (int64_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], x[i]);
    EXPECT_EQ(dx[i], x[i]);
  }
}

TEST(Interaction, OneVectorHasNoPairs) {
  Interaction<float> layer(InteractionKind::kDot, 5);
  EXPECT_EQ(*layer.Configure({5}), (Shape{5}));
}

TEST(Interaction, RefusesInputsDimDoesNotDivide) {
  struct Case {
    int64_t dim;
    Shape in;
    std::string error;
  };
  const Case cases[] = {
      {16,
       {100},
       "interaction(dot, ? x 16): expects a flat input of 1 + T vectors of "
       "dim 16 features ({dim (1 + T)}) but got [100]"},
      {4, {4, 3}, "but got [4, 3]"},
      {0, {8}, "interaction(dot, ? x 0): dim must be positive, got 0"},
  };
  for (const Case& c : cases) {
    Interaction<float> layer(InteractionKind::kDot, c.dim);
    const absl::StatusOr<Shape> out = layer.Configure(c.in);
    ASSERT_FALSE(out.ok()) << c.error;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(c.error), std::string::npos)
        << out.status();
  }
}

TEST(Interaction, GradientsMatchFiniteDifferences) {
  for (InteractionKind kind : {InteractionKind::kDot, InteractionKind::kCat}) {
    Interaction<double> layer(kind, 3);
    const absl::Status s = CheckLayerGradients(layer, {15}, {4, 15});
    EXPECT_TRUE(s.ok()) << s;
  }
}

// DLRM's widths (26 embeddings and the bottom MLP's vector of 16) over a
// batch large enough to split into ranges.
std::vector<float> DotOnThreads(int threads) {
  SetOnednnThreads(threads);
  Interaction<float> layer(InteractionKind::kDot, 16);
  EXPECT_TRUE(layer.Configure({27 * 16}).ok());
  Tensor x({512, 27 * 16}), y, dx;
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 1013) * 0.002f - 1.0f;
  }
  layer.Forward(x, &y, Mode::kTrain);
  Tensor dy(y.shape());
  for (int64_t i = 0; i < dy.size(); ++i) {
    dy[i] = static_cast<float>((i * 104729) % 997) * 0.002f - 1.0f;
  }
  layer.Backward(dy, &dx);
  std::vector<float> all(y.data(), y.data() + y.size());
  all.insert(all.end(), dx.data(), dx.data() + dx.size());
  SetOnednnThreads(0);
  return all;
}

TEST(Interaction, SameBitsOnOneAndTwoThreads) {
  EXPECT_EQ(DotOnThreads(1), DotOnThreads(2));
}

TEST(Interaction, FloatAndDoubleAgree) {
  Interaction<float> f(InteractionKind::kDot, 8);
  Interaction<double> d(InteractionKind::kDot, 8);
  ASSERT_TRUE(f.Configure({40}).ok());
  ASSERT_TRUE(d.Configure({40}).ok());
  Tensor xf({6, 40}), yf, dxf;
  TensorD xd({6, 40}), yd, dxd;
  for (int64_t i = 0; i < xf.size(); ++i) {
    xd[i] = xf[i] = static_cast<float>((i * 31) % 17) * 0.125f - 1;
  }
  f.Forward(xf, &yf, Mode::kTrain);
  d.Forward(xd, &yd, Mode::kTrain);
  Tensor dyf(yf.shape());
  TensorD dyd(yd.shape());
  for (int64_t i = 0; i < dyf.size(); ++i) {
    dyd[i] = dyf[i] = static_cast<float>((i * 13) % 11) * 0.25f - 1;
  }
  f.Backward(dyf, &dxf);
  d.Backward(dyd, &dxd);
  ASSERT_EQ(yf.size(), yd.size());
  for (int64_t i = 0; i < yf.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-5) << i;
  for (int64_t i = 0; i < dxf.size(); ++i) {
    EXPECT_NEAR(dxf[i], dxd[i], 1e-5) << i;
  }
}

}  // namespace
}  // namespace cohort
