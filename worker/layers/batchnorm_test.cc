#include "worker/layers/batchnorm.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

constexpr double kEps = 1e-5;

// Configures `layer`, binds it to `store` and sets its weight and bias.
template <typename T>
void BindLayer(BatchNormBase<T>& layer, const Shape& in, ParamStore<T>& store,
               const std::vector<double>& weight,
               const std::vector<double>& bias) {
  ASSERT_TRUE(layer.Configure(in).ok());
  Layer<T>* layers[] = {&layer};
  store.Build(layers);
  const auto& e = store.entries();
  ASSERT_EQ(e.size(), 2u);
  for (size_t c = 0; c < weight.size(); ++c) {
    store.values()[e[0].offset + c] = static_cast<T>(weight[c]);
    store.values()[e[1].offset + c] = static_cast<T>(bias[c]);
  }
}

TEST(BatchNorm2d, TrainUsesBatchStatisticsAndUpdatesRunningOnes) {
  BatchNorm2d<double> bn;
  ParamStore<double> store;
  BindLayer<double>(bn, {2, 1, 2}, store, {2.0, 0.5}, {1.0, -1.0});
  // {C=2, N=2, H=1, W=2}: channel 0 holds 1 2 3 4, channel 1 holds
  // 10 10 10 14.
  TensorD in({2, 2, 1, 2});
  const double v[] = {1, 2, 3, 4, 10, 10, 10, 14};
  for (int i = 0; i < 8; ++i) in[i] = v[i];
  TensorD out;
  bn.Forward(in, &out, Mode::kTrain);
  // Channel 0: mean 2.5, biased var 1.25; channel 1: mean 11, var 3.
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(out[i], 2.0 * (v[i] - 2.5) / std::sqrt(1.25 + kEps) + 1.0,
                1e-12);
    EXPECT_NEAR(out[4 + i], 0.5 * (v[4 + i] - 11) / std::sqrt(3 + kEps) - 1.0,
                1e-12);
  }
  // running = 0.9 running + 0.1 batch, with the unbiased variance (x 4/3).
  std::vector<TensorD*> buffers = bn.Buffers();
  ASSERT_EQ(buffers.size(), 2u);
  const TensorD& mean = *buffers[0];
  const TensorD& var = *buffers[1];
  EXPECT_NEAR(mean[0], 0.25, 1e-12);
  EXPECT_NEAR(mean[1], 1.1, 1e-12);
  EXPECT_NEAR(var[0], 0.9 + 0.1 * 1.25 * 4 / 3, 1e-12);
  EXPECT_NEAR(var[1], 0.9 + 0.1 * 3 * 4 / 3, 1e-12);

  // Eval normalizes with the running statistics instead.
  bn.Forward(in, &out, Mode::kEval);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(out[i], 2.0 * (v[i] - 0.25) / std::sqrt(var[0] + kEps) + 1.0,
                1e-12);
    EXPECT_NEAR(out[4 + i],
                0.5 * (v[4 + i] - 1.1) / std::sqrt(var[1] + kEps) - 1.0, 1e-12);
  }
  // Eval leaves the running statistics alone.
  EXPECT_NEAR(mean[0], 0.25, 1e-12);
}

TEST(BatchNorm2d, RunningStatisticsConvergeToBatchStatistics) {
  BatchNorm2d<float> bn(BatchNormOptions{1e-5, 0.5});
  ParamStore<float> store;
  BindLayer<float>(bn, {1, 2, 2}, store, {1.0}, {0.0});
  Tensor in({1, 2, 2, 2});
  for (int i = 0; i < 8; ++i) in[i] = static_cast<float>(i * i);
  // Momentum 0.5 converges to the batch mean and unbiased variance.
  double mean = 0, sq = 0;
  for (int i = 0; i < 8; ++i) mean += i * i / 8.0;
  for (int i = 0; i < 8; ++i) sq += (i * i - mean) * (i * i - mean);
  Tensor out;
  for (int step = 0; step < 60; ++step) bn.Forward(in, &out, Mode::kTrain);
  EXPECT_NEAR((*bn.Buffers()[0])[0], mean, 1e-3);
  EXPECT_NEAR((*bn.Buffers()[1])[0], sq / 7, 1e-2);
}

TEST(BatchNorm1d, DenseMatchesNaiveComputation) {
  BatchNorm1d<double> bn;
  ParamStore<double> store;
  BindLayer<double>(bn, {3}, store, {1.5, -1.0, 0.25}, {0.0, 2.0, -3.0});
  TensorD in({4, 3});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = std::cos(1.3 * i) * (i + 1);
  TensorD out;
  bn.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), Shape({4, 3}));
  const double w[] = {1.5, -1.0, 0.25}, b[] = {0.0, 2.0, -3.0};
  for (int f = 0; f < 3; ++f) {
    double mean = 0, var = 0;
    for (int n = 0; n < 4; ++n) mean += in[n * 3 + f] / 4;
    for (int n = 0; n < 4; ++n) {
      var += (in[n * 3 + f] - mean) * (in[n * 3 + f] - mean) / 4;
    }
    for (int n = 0; n < 4; ++n) {
      EXPECT_NEAR(out[n * 3 + f],
                  w[f] * (in[n * 3 + f] - mean) / std::sqrt(var + kEps) + b[f],
                  1e-12)
          << n << " " << f;
    }
  }
}

TEST(BatchNorm1d, GradientsMatchFiniteDifferencesDense) {
  BatchNorm1d<double> bn;
  const absl::Status s = CheckLayerGradients(bn, {5}, {6, 5});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(BatchNorm1d, GradientsMatchFiniteDifferencesBatchInner) {
  BatchNorm1d<double> bn;
  const absl::Status s = CheckLayerGradients(bn, {3, 4}, {3, 2, 4});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(BatchNorm2d, GradientsMatchFiniteDifferences) {
  BatchNorm2d<double> bn;
  const absl::Status s = CheckLayerGradients(bn, {2, 3, 3}, {2, 4, 3, 3});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(BatchNorm2d, EvalBackwardScalesByRunningStatistics) {
  BatchNorm2d<double> bn;
  ParamStore<double> store;
  BindLayer<double>(bn, {1, 1, 3}, store, {3.0}, {0.5});
  TensorD in({1, 2, 1, 3});
  for (int i = 0; i < 6; ++i) in[i] = i - 2.0;
  TensorD out, grad_in, grad_out({1, 2, 1, 3});
  for (int i = 0; i < 6; ++i) grad_out[i] = 0.5 * i + 1;
  bn.Forward(in, &out, Mode::kEval);  // running mean 0, var 1
  bn.Backward(grad_out, &grad_in);
  const double k = 3.0 / std::sqrt(1.0 + kEps);
  double sum_g = 0, sum_gx = 0;
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(grad_in[i], k * grad_out[i], 1e-12);
    sum_g += grad_out[i];
    sum_gx += grad_out[i] * in[i] / std::sqrt(1.0 + kEps);
  }
  const auto& e = store.entries();
  EXPECT_NEAR(store.grads()[e[0].offset], sum_gx, 1e-12);
  EXPECT_NEAR(store.grads()[e[1].offset], sum_g, 1e-12);
}

// The float path (AVX2, double accumulators) against the double one, on
// channels long enough for the vector loops and their tails, and offset by
// a mean large enough that a naive E[x^2] - E[x]^2 in float would fail.
TEST(BatchNorm2d, FloatMatchesDoubleOnLargeOffsetChannels) {
  const Shape batch = {3, 4, 37, 29};
  BatchNorm2d<float> bf;
  BatchNorm2d<double> bd;
  ParamStore<float> sf;
  ParamStore<double> sd;
  BindLayer<float>(bf, {3, 37, 29}, sf, {1.0, 2.0, 0.5}, {0.1, 0.2, 0.3});
  BindLayer<double>(bd, {3, 37, 29}, sd, {1.0, 2.0, 0.5}, {0.1, 0.2, 0.3});
  Tensor xf(batch), gf(batch), of, dxf;
  TensorD xd(batch), gd(batch), od, dxd;
  Rng rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < xf.size(); ++i) {
    xf[i] = static_cast<float>(1000.0 + 0.5 * normal(rng));
    xd[i] = xf[i];
    gf[i] = static_cast<float>(normal(rng));
    gd[i] = gf[i];
  }
  bf.Forward(xf, &of, Mode::kTrain);
  bd.Forward(xd, &od, Mode::kTrain);
  bf.Backward(gf, &dxf);
  bd.Backward(gd, &dxd);
  for (int64_t i = 0; i < xf.size(); ++i) {
    ASSERT_NEAR(of[i], od[i], 2e-3) << i;
    ASSERT_NEAR(dxf[i], dxd[i], 2e-3 * (1 + std::abs(dxd[i]))) << i;
  }
  for (int64_t i = 0; i < 2 * 16; ++i) {
    EXPECT_NEAR(sf.grads()[i], sd.grads()[i],
                1e-3 * (1 + std::abs(sd.grads()[i])))
        << i;
  }
  EXPECT_NEAR((*bf.Buffers()[1])[0], (*bd.Buffers()[1])[0], 1e-4);
}

TEST(BatchNorm, RejectsBadOptionsAndShapes) {
  BatchNorm2d<float> zero_eps(BatchNormOptions{0.0, 0.1});
  absl::Status s = zero_eps.Configure({3, 4, 4}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("eps must be a positive number, got 0"),
            std::string::npos)
      << s;
  BatchNorm1d<float> bad_momentum(BatchNormOptions{1e-5, 1.5});
  s = bad_momentum.Configure({3}).status();
  EXPECT_NE(s.message().find("momentum must be in [0, 1], got 1.5"),
            std::string::npos)
      << s;
  BatchNorm2d<float> flat;
  s = flat.Configure({3, 4}).status();
  EXPECT_NE(s.message().find("expected a per-sample input of shape [C, H, W]"
                             ", got [3, 4]"),
            std::string::npos)
      << s;
  BatchNorm1d<float> image;
  s = image.Configure({3, 4, 4}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// Channels run on the compute threads; every output, statistic and
// gradient is the same on one thread and on two.
TEST(BatchNorm2d, SameBitsOnOneAndTwoThreads) {
  const int64_t c = 64, n = 4;
  auto run = [&](int threads) {
    SetOnednnThreads(threads);
    BatchNorm2d<float> bn;
    ParamStore<float> store;
    BindLayer<float>(bn, {c, 32, 32}, store, std::vector<double>(c, 1.5),
                     std::vector<double>(c, 0.25));
    Tensor x({c, n, 32, 32}), dy({c, n, 32, 32}), y, dx;
    for (int64_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>((i * 7919) % 1013) * 0.01f - 5.0f;
      dy[i] = static_cast<float>((i * 104729) % 997) * 0.002f - 1.0f;
    }
    bn.Forward(x, &y, Mode::kTrain);
    bn.Backward(dy, &dx);
    std::vector<float> all(y.data(), y.data() + y.size());
    all.insert(all.end(), dx.data(), dx.data() + dx.size());
    const Tensor& g = store.grads();
    all.insert(all.end(), g.data(), g.data() + g.size());
    SetOnednnThreads(0);
    return all;
  };
  EXPECT_EQ(run(1), run(2));
}

}  // namespace
}  // namespace cohort
