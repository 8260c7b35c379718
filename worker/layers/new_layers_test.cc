// GELU, SiLU, tanh, sigmoid, LeakyReLU, ReLU6, hardsigmoid, hardswish,
// LayerNorm, GroupNorm, MaxPool1d and AvgPool1d: values on hand-checked
// inputs, gradients against finite differences on every layout, and the
// refusals of Configure. Their agreement with PyTorch is
// tests/layers_torch_test.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/elementwise_activation.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/norm.h"
#include "worker/layers/param_store.h"
#include "worker/layers/pool1d.h"

namespace cohort {
namespace {

constexpr ActivationKind kAllActivations[] = {
    ActivationKind::kGelu,     ActivationKind::kGeluTanh,
    ActivationKind::kSilu,     ActivationKind::kTanh,
    ActivationKind::kSigmoid,  ActivationKind::kLeakyRelu,
    ActivationKind::kRelu6,    ActivationKind::kHardsigmoid,
    ActivationKind::kHardswish};

TEST(ElementwiseActivation, ValuesMatchTheFormulas) {
  TensorD in({2, 3});
  const double v[] = {-2.0, -0.5, 0.0, 0.3, 1.0, 3.0};
  for (int i = 0; i < 6; ++i) in[i] = v[i];
  for (ActivationKind k : kAllActivations) {
    ElementwiseActivation<double> a(k, 0.2);
    ASSERT_TRUE(a.Configure({3}).ok());
    TensorD out;
    a.Forward(in, &out, Mode::kTrain);
    for (int i = 0; i < 6; ++i) {
      const double x = v[i];
      double want = 0;
      switch (k) {
        case ActivationKind::kGelu:
          want = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
          break;
        case ActivationKind::kGeluTanh:
          want =
              0.5 * x *
              (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
          break;
        case ActivationKind::kSilu:
          want = x / (1 + std::exp(-x));
          break;
        case ActivationKind::kTanh:
          want = std::tanh(x);
          break;
        case ActivationKind::kSigmoid:
          want = 1 / (1 + std::exp(-x));
          break;
        case ActivationKind::kLeakyRelu:
          want = x > 0 ? x : 0.2 * x;
          break;
        case ActivationKind::kRelu6:
          want = std::min(std::max(x, 0.0), 6.0);
          break;
        case ActivationKind::kHardsigmoid:
          want = std::min(std::max(x + 3, 0.0), 6.0) / 6;
          break;
        case ActivationKind::kHardswish:
          want = x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
          break;
      }
      EXPECT_NEAR(out[i], want, 1e-15) << a.Name() << " at " << x;
    }
  }
}

TEST(ElementwiseActivation, GradientsMatchFiniteDifferences) {
  for (ActivationKind k : kAllActivations) {
    ElementwiseActivation<double> dense(k, -0.3);
    absl::Status s = CheckLayerGradients(dense, {7}, {5, 7});
    EXPECT_TRUE(s.ok()) << dense.Name() << ": " << s;
    ElementwiseActivation<double> spatial(k, 0.05);
    s = CheckLayerGradients(spatial, {3, 4, 5}, {3, 2, 4, 5});
    EXPECT_TRUE(s.ok()) << spatial.Name() << ": " << s;
  }
}

TEST(ElementwiseActivation, FloatMatchesDouble) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 2);
  TensorD xd({64});
  Tensor xf({64});
  for (int i = 0; i < 64; ++i) xf[i] = static_cast<float>(xd[i] = normal(rng));
  for (ActivationKind k : kAllActivations) {
    ElementwiseActivation<double> d(k);
    ElementwiseActivation<float> f(k);
    TensorD yd, gd;
    Tensor yf, gf;
    d.Forward(xd, &yd, Mode::kTrain);
    f.Forward(xf, &yf, Mode::kTrain);
    d.Backward(xd, &gd);  // any upstream gradient will do
    f.Backward(xf, &gf);
    for (int i = 0; i < 64; ++i) {
      EXPECT_NEAR(yf[i], yd[i], 1e-5 * (1 + std::abs(yd[i]))) << d.Name();
      EXPECT_NEAR(gf[i], gd[i], 1e-5 * (1 + std::abs(gd[i]))) << d.Name();
    }
  }
}

// The float kernels use their own exp, erf and tanh (kernels/activations.cc)
// so that the loops vectorise: on a fine sweep of the whole useful range
// they must stay within a few float roundings of the double functions.
TEST(ElementwiseActivation, FloatKernelsStayWithinFloatRoundingOfDouble) {
  std::vector<float> xf;
  for (double x = -100; x <= 100; x += 1e-3)
    xf.push_back(static_cast<float>(x));
  const int64_t n = xf.size();
  std::vector<double> xd(xf.begin(), xf.end()), ones(n, 1.0);
  std::vector<float> yf(n), gf(n), onesf(n, 1.0f);
  std::vector<double> yd(n), gd(n);
  for (ActivationKind k : kAllActivations) {
    ActivationForward<float>(k, 0.01f, xf.data(), yf.data(), n);
    ActivationForward<double>(k, static_cast<double>(0.01f), xd.data(),
                              yd.data(), n);
    ActivationBackward<float>(k, 0.01f, xf.data(), onesf.data(), gf.data(), n);
    ActivationBackward<double>(k, static_cast<double>(0.01f), xd.data(),
                               ones.data(), gd.data(), n);
    double worst_y = 0, worst_g = 0;
    for (int64_t i = 0; i < n; ++i) {
      // Relative to the value, or to the input where the value cancels
      // (GELU and SiLU near -inf).
      const double scale = std::max(1.0, std::abs(xd[i]));
      worst_y = std::max(worst_y, std::abs(yf[i] - yd[i]) / scale);
      worst_g = std::max(worst_g, std::abs(gf[i] - gd[i]) / scale);
    }
    EXPECT_LT(worst_y, 1e-6) << static_cast<int>(k);
    EXPECT_LT(worst_g, 2e-6) << static_cast<int>(k);
    std::printf("kind %d: forward %.2g, backward %.2g\n", static_cast<int>(k),
                worst_y, worst_g);
  }
}

TEST(LayerNorm, NormalisesEachSampleOverAllItsFeatures) {
  // {C=2, N=2, L=2}: sample 0 holds 1 2 | 3 4, sample 1 holds 0 0 | 0 8.
  LayerNorm<double> ln(NormOptions{1e-5, false, 1});
  ASSERT_TRUE(ln.Configure({2, 2}).ok());
  TensorD in({2, 2, 2});
  const double v[] = {1, 2, 0, 0, 3, 4, 0, 8};
  for (int i = 0; i < 8; ++i) in[i] = v[i];
  TensorD out;
  ln.Forward(in, &out, Mode::kEval);
  const double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(12 + 1e-5);
  const double want[] = {-1.5 / s0, -0.5 / s0, -2 / s1, -2 / s1,
                         0.5 / s0,  1.5 / s0,  -2 / s1, 6 / s1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], want[i], 1e-12) << i;
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  for (bool affine : {true, false}) {
    NormOptions o{1e-5, affine, 1};
    LayerNorm<double> dense(o), one_d(o), two_d(o);
    absl::Status s = CheckLayerGradients(dense, {6}, {4, 6});
    EXPECT_TRUE(s.ok()) << s;
    s = CheckLayerGradients(one_d, {3, 5}, {3, 4, 5});
    EXPECT_TRUE(s.ok()) << s;
    s = CheckLayerGradients(two_d, {3, 4, 2}, {3, 3, 4, 2});
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(LayerNorm, WeightHasThePerSampleShape) {
  LayerNorm<float> ln(NormOptions{});
  ASSERT_TRUE(ln.Configure({3, 4, 5}).ok());
  const std::vector<ParamDecl> p = ln.Params();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "weight");
  EXPECT_EQ(p[0].shape, (Shape{3, 4, 5}));
  EXPECT_EQ(p[1].name, "bias");
  LayerNorm<float> plain(NormOptions{1e-5, false, 1});
  ASSERT_TRUE(plain.Configure({3}).ok());
  EXPECT_TRUE(plain.Params().empty());
}

TEST(GroupNorm, GradientsMatchFiniteDifferences) {
  for (bool affine : {true, false}) {
    for (int64_t groups : {1, 2, 6}) {
      NormOptions o{1e-5, affine, groups};
      GroupNorm<double> dense(o), one_d(o), two_d(o);
      absl::Status s = CheckLayerGradients(dense, {6}, {4, 6});
      EXPECT_TRUE(s.ok()) << dense.Name() << ": " << s;
      s = CheckLayerGradients(one_d, {6, 5}, {6, 3, 5});
      EXPECT_TRUE(s.ok()) << one_d.Name() << ": " << s;
      s = CheckLayerGradients(two_d, {6, 3, 2}, {6, 2, 3, 2});
      EXPECT_TRUE(s.ok()) << two_d.Name() << ": " << s;
    }
  }
}

TEST(GroupNorm, GroupsMustDivideTheChannels) {
  GroupNorm<float> g(NormOptions{1e-5, true, 4});
  absl::StatusOr<Shape> s = g.Configure({6, 3, 3});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "groupnorm: groups (4) must divide the channels (6) of [6, 3, 3]");
  GroupNorm<float> bad_eps(NormOptions{0.0, true, 1});
  EXPECT_FALSE(bad_eps.Configure({6, 3, 3}).ok());
}

TEST(Pool1d, MaxAndAverageMatchPyTorchsWindows) {
  // One row 1 5 2 8 3, kernel 3, stride 2, padding 1: windows [pad 1 5],
  // [5 2 8], [8 3 pad].
  TensorD in({1, 1, 5});
  const double v[] = {1, 5, 2, 8, 3};
  for (int i = 0; i < 5; ++i) in[i] = v[i];
  Pool1d<double> max(true, {3, 2, 1}), avg(false, {3, 2, 1});
  ASSERT_EQ(*max.Configure({1, 5}), (Shape{1, 3}));
  ASSERT_EQ(*avg.Configure({1, 5}), (Shape{1, 3}));
  TensorD out;
  max.Forward(in, &out, Mode::kTrain);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 8);
  EXPECT_EQ(out[2], 8);
  TensorD dy({1, 1, 3}), dx;
  dy[0] = 1, dy[1] = 10, dy[2] = 100;
  max.Backward(dy, &dx);
  const double want_dx[] = {0, 1, 0, 110, 0};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dx[i], want_dx[i]) << i;
  avg.Forward(in, &out, Mode::kTrain);
  EXPECT_DOUBLE_EQ(out[0], 6.0 / 3);  // padding counts in the divisor
  EXPECT_DOUBLE_EQ(out[1], 15.0 / 3);
  EXPECT_DOUBLE_EQ(out[2], 11.0 / 3);
}

TEST(Pool1d, GradientsMatchFiniteDifferences) {
  for (PoolOptions o : {PoolOptions{2, 2, 0}, PoolOptions{3, 2, 1},
                        PoolOptions{2, 1, 0}, PoolOptions{5, 3, 2}}) {
    for (bool max : {true, false}) {
      Pool1d<double> pool(max, o);
      const absl::Status s = CheckLayerGradients(pool, {3, 11}, {3, 4, 11});
      EXPECT_TRUE(s.ok()) << pool.Name() << ": " << s;
    }
  }
}

TEST(Pool1d, RejectsBadOptionsAndShapes) {
  Pool1d<float> big(true, {4, 0, 2});
  EXPECT_FALSE(Pool1d<float>(true, {4, 0, 3}).Configure({2, 10}).ok());
  EXPECT_FALSE(Pool1d<float>(false, {0, 0, 0}).Configure({2, 10}).ok());
  EXPECT_FALSE(Pool1d<float>(false, {2, 0, 0}).Configure({2, 3, 3}).ok());
  absl::StatusOr<Shape> s = Pool1d<float>(true, {9, 0, 1}).Configure({2, 6});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "maxpool1d(k9, s9, p1): the kernel does not fit the padded input "
            "8 of [2, 6]");
  EXPECT_EQ(*big.Configure({2, 6}), (Shape{2, 2}));  // (6 + 4 - 4) / 4 + 1
}

// The activations run in ranges on the compute threads; every bit of the
// output and the input gradient stays the same.
std::vector<float> ActivationOnThreads(int threads, ActivationKind kind) {
  SetOnednnThreads(threads);
  ElementwiseActivation<float> layer(kind);
  EXPECT_TRUE(layer.Configure({96, 28, 28}).ok());
  Tensor x({96, 4, 28, 28}), dy({96, 4, 28, 28}), y, dx;
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 1013) * 0.02f - 10.0f;
    dy[i] = static_cast<float>((i * 104729) % 997) * 0.002f - 1.0f;
  }
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(dy, &dx);
  std::vector<float> all(y.data(), y.data() + y.size());
  all.insert(all.end(), dx.data(), dx.data() + dx.size());
  SetOnednnThreads(0);
  return all;
}

TEST(ElementwiseActivation, SameBitsOnOneAndTwoThreads) {
  for (ActivationKind kind :
       {ActivationKind::kGelu, ActivationKind::kGeluTanh, ActivationKind::kSilu,
        ActivationKind::kRelu6, ActivationKind::kHardswish}) {
    EXPECT_EQ(ActivationOnThreads(1, kind), ActivationOnThreads(2, kind))
        << ActivationName(kind, 0.01);
  }
}

// The norms split their (sample, group)s over the compute threads: every
// bit of the output, the input gradient and the parameter gradients stays
// the same. LayerNorm and GroupNorm over spatial samples, GroupNorm over
// dense features; samples enough for both threads to get some.
std::vector<float> NormOnThreads(int threads, bool layer_norm, Shape sample,
                                 Shape batch) {
  SetOnednnThreads(threads);
  std::unique_ptr<Layer<float>> layer;
  if (layer_norm) {
    layer = std::make_unique<LayerNorm<float>>(NormOptions{});
  } else {
    layer = std::make_unique<GroupNorm<float>>(NormOptions{1e-5, true, 4});
  }
  EXPECT_TRUE(layer->Configure(sample).ok());
  ParamStore<float> store;
  Layer<float>* layers[] = {layer.get()};
  store.Build(layers);
  for (int64_t i = 0; i < store.values().size(); ++i) {
    store.values()[i] = static_cast<float>((i * 31) % 17) * 0.125f - 1.0f;
  }
  Tensor x(batch), dy(batch), y, dx;
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 1013) * 0.02f - 10.0f;
    dy[i] = static_cast<float>((i * 104729) % 997) * 0.002f - 1.0f;
  }
  layer->Forward(x, &y, Mode::kTrain);
  layer->Backward(dy, &dx);
  std::vector<float> all(y.data(), y.data() + y.size());
  all.insert(all.end(), dx.data(), dx.data() + dx.size());
  all.insert(all.end(), store.grads().data(),
             store.grads().data() + store.grads().size());
  SetOnednnThreads(0);
  return all;
}

TEST(Norms, SameBitsOnOneAndTwoThreads) {
  for (bool layer_norm : {true, false}) {
    SCOPED_TRACE(layer_norm ? "layernorm" : "groupnorm");
    EXPECT_EQ(NormOnThreads(1, layer_norm, {16, 24, 24}, {16, 32, 24, 24}),
              NormOnThreads(2, layer_norm, {16, 24, 24}, {16, 32, 24, 24}));
  }
  EXPECT_EQ(NormOnThreads(1, false, {4096}, {64, 4096}),
            NormOnThreads(2, false, {4096}, {64, 4096}));
  // Rows of 63 elements: LayerNorm's parameter gradients split inside rows
  // and into vector tails.
  EXPECT_EQ(NormOnThreads(1, true, {40, 7, 9}, {40, 64, 7, 9}),
            NormOnThreads(2, true, {40, 7, 9}, {40, 64, 7, 9}));
  EXPECT_EQ(NormOnThreads(1, true, {4101}, {64, 4101}),
            NormOnThreads(2, true, {4101}, {64, 4101}));
}

}  // namespace
}  // namespace cohort
