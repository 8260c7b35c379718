#include "worker/layers/flatten.h"

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

TEST(Flatten, ConfigureGivesFeatureCount) {
  Flatten<float> f;
  absl::StatusOr<Shape> out = f.Configure({3, 4, 5});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, Shape({60}));
}

TEST(Flatten, RejectsRankFour) {
  Flatten<float> f;
  absl::StatusOr<Shape> out = f.Configure({1, 2, 3, 4});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("[1, 2, 3, 4]"), std::string::npos)
      << out.status();
}

TEST(Flatten, UsesPyTorchFeatureOrder) {
  // Batch-inner {C=2, N=3, H=2, W=2}; element value encodes (c, n, h, w).
  Flatten<float> f;
  ASSERT_TRUE(f.Configure({2, 2, 2}).ok());
  Tensor in({2, 3, 2, 2});
  auto code = [](int c, int n, int h, int w) {
    return 1000 * c + 100 * n + 10 * h + w;
  };
  for (int c = 0; c < 2; ++c)
    for (int n = 0; n < 3; ++n)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          in[((c * 3 + n) * 2 + h) * 2 + w] = code(c, n, h, w);
  Tensor out;
  f.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), Shape({3, 8}));
  // PyTorch's x.view(N, -1) on NCHW: feature index c * H * W + h * W + w.
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          EXPECT_EQ(out[n * 8 + c * 4 + h * 2 + w], code(c, n, h, w));
  Tensor back;
  f.Backward(out, &back);
  ASSERT_EQ(back.shape(), in.shape());
  for (int64_t i = 0; i < in.size(); ++i) EXPECT_EQ(back[i], in[i]);
}

TEST(Flatten, DensePassesThrough) {
  Flatten<float> f;
  ASSERT_TRUE(f.Configure({4}).ok());
  Tensor in({2, 4});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = i * 0.5f;
  Tensor out;
  f.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), in.shape());
  for (int64_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i]);
}

TEST(Flatten, GradientsMatchFiniteDifferences) {
  Flatten<double> f2;
  absl::Status s = CheckLayerGradients(f2, {3, 2, 4}, {3, 5, 2, 4});
  EXPECT_TRUE(s.ok()) << s;
  Flatten<double> f1;
  s = CheckLayerGradients(f1, {3, 6}, {3, 2, 6});
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace cohort
