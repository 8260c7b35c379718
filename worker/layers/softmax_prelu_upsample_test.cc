// Softmax over the features, PReLU and Upsample: values on hand-checked
// inputs, gradients against finite differences on every layout they take,
// float against double, and the refusals of Configure. Their agreement
// with PyTorch is tests/layers_torch_test.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"
#include "worker/layers/prelu.h"
#include "worker/layers/softmax.h"
#include "worker/layers/upsample.h"

namespace cohort {
namespace {

// The batch shape of `n` samples of `sample` in the engine's layout.
Shape Batched(const Shape& sample, int64_t n) {
  if (sample.size() == 1) return {n, sample[0]};
  Shape b = {sample[0], n};
  b.insert(b.end(), sample.begin() + 1, sample.end());
  return b;
}

template <typename T>
void FillNormal(BasicTensor<T>& t, uint64_t seed, double scale = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, scale);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<T>(normal(rng));
}

TEST(Softmax, ChannelsAtEachPositionSumToOne) {
  // {C, N, L} = {3, 2, 2}: softmax across the three channels per column.
  TensorD in({3, 2, 2});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.5 * i - 2;
  Softmax<double> s;
  ASSERT_TRUE(s.Configure({3, 2}).ok());
  TensorD out;
  s.Forward(in, &out, Mode::kTrain);
  for (int64_t col = 0; col < 4; ++col) {
    double denominator = 0;
    for (int64_t c = 0; c < 3; ++c) denominator += std::exp(in[c * 4 + col]);
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(out[c * 4 + col], std::exp(in[c * 4 + col]) / denominator,
                  1e-15);
    }
  }
}

TEST(Softmax, HugeLogitsStayFinite) {
  Tensor in({1, 3});
  in[0] = 1000;
  in[1] = 999;
  in[2] = -1000;
  Softmax<float> s;
  ASSERT_TRUE(s.Configure({3}).ok());
  Tensor out;
  s.Forward(in, &out, Mode::kTrain);
  const double e = std::exp(-1.0);
  EXPECT_NEAR(out[0], 1 / (1 + e), 1e-6);
  EXPECT_NEAR(out[1], e / (1 + e), 1e-6);
  EXPECT_NEAR(out[2], 0, 1e-30);
}

TEST(Softmax, GradientsMatchFiniteDifferences) {
  // 300 positions per channel: more than one block of the column kernel.
  for (const Shape& in :
       {Shape{7}, Shape{4, 5}, Shape{3, 4, 5}, Shape{2, 150}, Shape{1, 3, 3}}) {
    Softmax<double> s;
    const absl::Status status = CheckLayerGradients(s, in, Batched(in, 3));
    EXPECT_TRUE(status.ok()) << ShapeString(in) << ": " << status;
  }
}

TEST(Softmax, FloatMatchesDouble) {
  const Shape sample = {5, 3, 70};
  TensorD xd(Batched(sample, 2)), gd;
  FillNormal(xd, 3, 3);
  Tensor xf(xd.shape());
  for (int64_t i = 0; i < xd.size(); ++i) xf[i] = static_cast<float>(xd[i]);
  Softmax<double> d;
  Softmax<float> f;
  ASSERT_TRUE(d.Configure(sample).ok());
  ASSERT_TRUE(f.Configure(sample).ok());
  TensorD yd;
  Tensor yf, gf;
  d.Forward(xd, &yd, Mode::kTrain);
  f.Forward(xf, &yf, Mode::kTrain);
  TensorD dyd(yd.shape());
  FillNormal(dyd, 4);
  Tensor dyf(yd.shape());
  for (int64_t i = 0; i < dyd.size(); ++i) dyf[i] = static_cast<float>(dyd[i]);
  d.Backward(dyd, &gd);
  f.Backward(dyf, &gf);
  for (int64_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-6);
  for (int64_t i = 0; i < gd.size(); ++i) EXPECT_NEAR(gf[i], gd[i], 1e-5);
}

TEST(Softmax, ConfigureRefusesWhatDoesNotFit) {
  Softmax<float> s;
  EXPECT_FALSE(s.Configure({}).ok());
  EXPECT_FALSE(s.Configure({2, 3, 4, 5}).ok());
  const absl::Status bad = s.Configure({3, 0}).status();
  EXPECT_NE(bad.message().find("softmax"), std::string::npos) << bad;
}

TEST(Prelu, NegativeInputsTakeTheirChannelsSlope) {
  // {C, N, L} = {2, 1, 3}, one slope per channel.
  TensorD in({2, 1, 3});
  const double v[] = {-1, 0, 2, -3, 4, -0.5};
  for (int i = 0; i < 6; ++i) in[i] = v[i];
  Prelu<double> p(2, 0.25);
  ASSERT_TRUE(p.Configure({2, 3}).ok());
  ParamStore<double> store;
  Layer<double>* list[] = {&p};
  store.Build(list);
  Rng rng(1);
  store.Initialize(rng);
  EXPECT_EQ(store.values()[0], 0.25);  // PyTorch's starting slope
  store.values()[1] = -2;
  TensorD out;
  p.Forward(in, &out, Mode::kTrain);
  const double want[] = {-0.25, 0, 2, 6, 4, 1};
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(out[i], want[i]) << i;
}

TEST(Prelu, GradientsMatchFiniteDifferences) {
  for (const Shape& in : {Shape{6}, Shape{3, 8}, Shape{3, 4, 5}}) {
    for (int64_t num : {int64_t{1}, in[0]}) {
      Prelu<double> p(num, 0.25);
      const absl::Status status = CheckLayerGradients(p, in, Batched(in, 4));
      EXPECT_TRUE(status.ok())
          << p.Name() << " on " << ShapeString(in) << ": " << status;
    }
  }
}

TEST(Prelu, ConfigureRefusesSlopesThatMatchNoChannels) {
  Prelu<float> p(4, 0.25);
  const absl::Status bad = p.Configure({3, 8, 8}).status();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("num_parameters must be 1 or the input's "
                               "channels (3), got 4"),
            std::string::npos)
      << bad;
  EXPECT_TRUE(p.Configure({4, 8, 8}).ok());
  EXPECT_FALSE(p.Configure({4, 2, 2, 2}).ok());
}

TEST(Upsample, NearestRepeatsEachInput) {
  TensorD in({1, 1, 2, 2});
  for (int i = 0; i < 4; ++i) in[i] = i + 1;
  Upsample<double> u(3, UpsampleMode::kNearest);
  ASSERT_EQ(*u.Configure({1, 2, 2}), (Shape{1, 6, 6}));
  TensorD out;
  u.Forward(in, &out, Mode::kTrain);
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      EXPECT_EQ(out[i * 6 + j], in[(i / 3) * 2 + j / 3]) << i << ", " << j;
    }
  }
}

TEST(Upsample, BilinearFollowsHalfPixelCentres) {
  // One row [0, 4] upsampled by 2: sources -0.25 (clamped to 0), 0.25,
  // 0.75, 1.25 (the last input's edge).
  TensorD in({1, 1, 1, 2});
  in[0] = 0;
  in[1] = 4;
  Upsample<double> u(2, UpsampleMode::kBilinear);
  ASSERT_TRUE(u.Configure({1, 1, 2}).ok());
  TensorD out;
  u.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), (Shape{1, 1, 2, 4}));
  const double want[] = {0, 1, 3, 4};
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(out[r * 4 + j], want[j]);
  }
}

TEST(Upsample, GradientsMatchFiniteDifferences) {
  for (UpsampleMode mode : {UpsampleMode::kNearest, UpsampleMode::kBilinear}) {
    for (int64_t scale : {1, 2, 3}) {
      for (const Shape& in : {Shape{2, 3, 4}, Shape{1, 1, 5}, Shape{3, 2, 2}}) {
        Upsample<double> u(scale, mode);
        const absl::Status status = CheckLayerGradients(u, in, Batched(in, 2));
        EXPECT_TRUE(status.ok())
            << u.Name() << " on " << ShapeString(in) << ": " << status;
      }
    }
  }
}

TEST(Upsample, FloatMatchesDouble) {
  for (UpsampleMode mode : {UpsampleMode::kNearest, UpsampleMode::kBilinear}) {
    const Shape sample = {2, 5, 7};
    TensorD xd(Batched(sample, 3)), yd, gd;
    FillNormal(xd, 6);
    Tensor xf(xd.shape()), yf, gf;
    for (int64_t i = 0; i < xd.size(); ++i) xf[i] = static_cast<float>(xd[i]);
    Upsample<double> d(3, mode);
    Upsample<float> f(3, mode);
    ASSERT_TRUE(d.Configure(sample).ok());
    ASSERT_TRUE(f.Configure(sample).ok());
    d.Forward(xd, &yd, Mode::kTrain);
    f.Forward(xf, &yf, Mode::kTrain);
    d.Backward(yd, &gd);  // any upstream gradient will do
    f.Backward(yf, &gf);
    for (int64_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-5);
    for (int64_t i = 0; i < gd.size(); ++i) EXPECT_NEAR(gf[i], gd[i], 1e-4);
  }
}

TEST(Upsample, ConfigureRefusesWhatDoesNotFit) {
  Upsample<float> u(2, UpsampleMode::kNearest);
  EXPECT_FALSE(u.Configure({12}).ok());
  const absl::Status flat = u.Configure({3, 8}).status();
  EXPECT_NE(flat.message().find("[C, H, W], got [3, 8]"), std::string::npos)
      << flat;
  EXPECT_FALSE(u.Configure({3, 0, 4}).ok());
  Upsample<float> zero(0, UpsampleMode::kBilinear);
  const absl::Status s = zero.Configure({3, 4, 4}).status();
  EXPECT_NE(s.message().find("scale must be at least 1, got 0"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace cohort
