#include "worker/layers/linear.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/conv.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

TEST(Linear, GradientsMatchFiniteDifferences) {
  Linear<double> layer(5);
  const absl::Status s = CheckLayerGradients(layer, {7}, {3, 7});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Linear, GradientsMatchFiniteDifferencesWithoutBias) {
  Linear<double> layer(4, /*bias=*/false);
  const absl::Status s = CheckLayerGradients(layer, {6}, {2, 6});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(layer.Params().size(), 1u);
}

TEST(Linear, ParameterGradientsWithoutInputGradient) {
  // The first layer of a model gets grad_in == nullptr.
  Linear<double> layer(3);
  GradCheckOptions o;
  o.check_input = false;
  const absl::Status s = CheckLayerGradients(layer, {4}, {5, 4}, o);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Linear, ForwardMatchesHandComputedValues) {
  Linear<float> layer(2);
  ASSERT_TRUE(layer.Configure({3}).ok());
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  // weight {{1, 2, 3}, {0, -1, 0.5}}, bias {10, -10}
  const float params[] = {1, 2, 3, 0, -1, 0.5f};
  float* v = store.values().data();
  for (int i = 0; i < 6; ++i) v[store.entries()[0].offset + i] = params[i];
  v[store.entries()[1].offset] = 10;
  v[store.entries()[1].offset + 1] = -10;
  Tensor in({2, 3});
  const float x[] = {1, 1, 1, 2, 0, -2};
  for (int i = 0; i < 6; ++i) in[i] = x[i];
  Tensor out;
  layer.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(out[0], 16.0f);   // 1 + 2 + 3 + 10
  EXPECT_FLOAT_EQ(out[1], -10.5f);  // -1 + 0.5 - 10
  EXPECT_FLOAT_EQ(out[2], 6.0f);    // 2 - 6 + 10
  EXPECT_FLOAT_EQ(out[3], -11.0f);  // -1 - 10
}

// The float layer agrees with the double layer on the same parameters and
// data, forward and backward.
TEST(Linear, FloatMatchesDouble) {
  const int64_t n = 9, in_f = 37, out_f = 21;
  Linear<float> lf(out_f);
  Linear<double> ld(out_f);
  ASSERT_TRUE(lf.Configure({in_f}).ok());
  ASSERT_TRUE(ld.Configure({in_f}).ok());
  ParamStore<float> sf;
  ParamStore<double> sd;
  Layer<float>* lfs[] = {&lf};
  Layer<double>* lds[] = {&ld};
  sf.Build(lfs);
  sd.Build(lds);
  Rng rng(5);
  sd.Initialize(rng);
  for (int64_t i = 0; i < sd.values().size(); ++i) {
    sf.values()[i] = static_cast<float>(sd.values()[i]);
  }
  std::normal_distribution<double> normal;
  Tensor xf({n, in_f}), gf({n, out_f}), yf, dxf;
  TensorD xd({n, in_f}), gd({n, out_f}), yd, dxd;
  for (int64_t i = 0; i < xd.size(); ++i) xf[i] = xd[i] = normal(rng);
  for (int64_t i = 0; i < gd.size(); ++i) gf[i] = gd[i] = normal(rng);
  lf.Forward(xf, &yf, Mode::kTrain);
  ld.Forward(xd, &yd, Mode::kTrain);
  lf.Backward(gf, &dxf);
  ld.Backward(gd, &dxd);
  auto expect_close = [](const auto& a, const TensorD& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (int64_t i = 0; i < b.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << what << i;
    }
  };
  expect_close(yf, yd, "output");
  expect_close(dxf, dxd, "input gradient");
  expect_close(sf.grads(), sd.grads(), "parameter gradients");
}

TEST(Linear, ConfigureRejectsBadShapes) {
  Linear<float> layer(120);
  const absl::StatusOr<Shape> r = layer.Configure({16, 5, 5});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "linear(?->120): expects a flat input {features} but got "
            "[16, 5, 5]; put a flatten layer before it");
  EXPECT_FALSE(layer.Configure({0}).ok());
  Linear<float> empty(0);
  EXPECT_FALSE(empty.Configure({4}).ok());
  ASSERT_TRUE(layer.Configure({400}).ok());
  EXPECT_EQ(layer.Name(), "linear(400->120)");
  EXPECT_EQ(*layer.Configure({400}), (Shape{120}));
}

TEST(Linear, ParamsFollowPyTorchLayout) {
  Linear<float> layer(10);
  ASSERT_TRUE(layer.Configure({84}).ok());
  const auto p = layer.Params();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].shape, (Shape{10, 84}));
  EXPECT_EQ(p[0].fan_in, 84);
  EXPECT_EQ(p[1].shape, (Shape{10}));
  EXPECT_EQ(p[1].fan_in, 84);
}

TEST(Linear, StepsReuseBuffers) {
  Linear<float> layer(8);
  ASSERT_TRUE(layer.Configure({4}).ok());
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  Tensor x({3, 4}), g({3, 8}), y, dx;
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(g, &dx);
  const float* y0 = y.data();
  const float* dx0 = dx.data();
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(g, &dx);
  EXPECT_EQ(y.data(), y0);
  EXPECT_EQ(dx.data(), dx0);
}

// Per position: per-sample {C, L}, batches in the engine's {C, N, L}.
TEST(Linear, PerPositionGradientsMatchFiniteDifferences) {
  Linear<double> layer(5, /*bias=*/true, /*per_position=*/true);
  const absl::Status s = CheckLayerGradients(layer, {3, 4}, {3, 2, 4});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Linear, PerPositionGradientsMatchFiniteDifferencesWithoutBias) {
  Linear<double> layer(2, /*bias=*/false, /*per_position=*/true);
  const absl::Status s = CheckLayerGradients(layer, {6, 5}, {6, 3, 5});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(layer.Params().size(), 1u);
  GradCheckOptions o;
  o.check_input = false;
  Linear<double> first(3, /*bias=*/true, /*per_position=*/true);
  const absl::Status f = CheckLayerGradients(first, {4, 1}, {4, 2, 1}, o);
  EXPECT_TRUE(f.ok()) << f;
}

TEST(Linear, PerPositionConfigure) {
  Linear<float> layer(6, /*bias=*/true, /*per_position=*/true);
  for (const Shape& bad : {Shape{12}, Shape{2, 3, 4}, Shape{0, 4}}) {
    const absl::StatusOr<Shape> r = layer.Configure(bad);
    ASSERT_FALSE(r.ok()) << ShapeString(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(layer.Configure({12}).status().message(),
            "linear(?->6, per position): per_position expects a sequence "
            "[C, L] but got [12]");
  ASSERT_TRUE(layer.Configure({5, 7}).ok());
  EXPECT_EQ(*layer.Configure({5, 7}), (Shape{6, 7}));
  EXPECT_EQ(layer.Name(), "linear(5->6, per position)");
  const auto p = layer.Params();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].shape, (Shape{6, 5}));  // nn.Linear(5, 6).weight
  EXPECT_EQ(p[0].fan_in, 5);
  EXPECT_EQ(p[1].shape, (Shape{6}));
}

// A per-position linear is a kernel-1 conv1d whose weight {O, C, 1} is
// reshaped to {O, C}: the same numbers forward and backward, on sizes that
// take the conv's and the GEMM's vector paths.
template <typename T>
void ExpectPerPositionMatchesConv1d(bool bias, double tolerance) {
  const int64_t c = 37, o = 21, n = 3, len = 19;
  Linear<T> linear(o, bias, /*per_position=*/true);
  ConvOptions co;
  co.out_channels = o;
  co.bias = bias;
  Conv1d<T> conv(co);
  ASSERT_EQ(*linear.Configure({c, len}), (Shape{o, len}));
  ASSERT_EQ(*conv.Configure({c, len}), (Shape{o, len}));
  ParamStore<T> ls, cs;
  Layer<T>* lls[] = {&linear};
  Layer<T>* cls[] = {&conv};
  ls.Build(lls);
  cs.Build(cls);
  Rng rng(11);
  cs.Initialize(rng);
  ASSERT_EQ(ls.entries().size(), cs.entries().size());
  for (size_t e = 0; e < cs.entries().size(); ++e) {
    const int64_t size = NumElements(cs.entries()[e].shape);
    ASSERT_EQ(NumElements(ls.entries()[e].shape), size);
    for (int64_t i = 0; i < size; ++i) {
      ls.values()[ls.entries()[e].offset + i] =
          cs.values()[cs.entries()[e].offset + i];
    }
  }
  std::normal_distribution<double> normal;
  BasicTensor<T> x({c, n, len}), g({o, n, len}), yl, yc, dxl, dxc;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  for (int64_t i = 0; i < g.size(); ++i) g[i] = normal(rng);
  linear.Forward(x, &yl, Mode::kTrain);
  conv.Forward(x, &yc, Mode::kTrain);
  linear.Backward(g, &dxl);
  conv.Backward(g, &dxc);
  auto expect_close = [tolerance](const T* a, const T* b, int64_t size,
                                  const std::string& what) {
    for (int64_t i = 0; i < size; ++i) {
      ASSERT_NEAR(a[i], b[i], tolerance * (1 + std::abs(b[i]))) << what << i;
    }
  };
  ASSERT_EQ(yl.shape(), yc.shape());
  ASSERT_EQ(dxl.shape(), dxc.shape());
  expect_close(yl.data(), yc.data(), yc.size(), "output ");
  expect_close(dxl.data(), dxc.data(), dxc.size(), "input gradient ");
  for (size_t e = 0; e < cs.entries().size(); ++e) {
    expect_close(ls.grads().data() + ls.entries()[e].offset,
                 cs.grads().data() + cs.entries()[e].offset,
                 NumElements(cs.entries()[e].shape), cs.entries()[e].name);
  }
}

TEST(Linear, PerPositionMatchesConv1dKernel1) {
  ExpectPerPositionMatchesConv1d<float>(/*bias=*/true, 1e-5);
  ExpectPerPositionMatchesConv1d<float>(/*bias=*/false, 1e-5);
  ExpectPerPositionMatchesConv1d<double>(/*bias=*/true, 1e-12);
}

TEST(Linear, PerPositionStepsReuseBuffers) {
  Linear<float> layer(8, /*bias=*/true, /*per_position=*/true);
  ASSERT_TRUE(layer.Configure({4, 5}).ok());
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  Tensor x({4, 3, 5}), g({8, 3, 5}), y, dx;
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(g, &dx);
  EXPECT_EQ(y.shape(), (Shape{8, 3, 5}));
  EXPECT_EQ(dx.shape(), (Shape{4, 3, 5}));
  const float* y0 = y.data();
  const float* dx0 = dx.data();
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(g, &dx);
  EXPECT_EQ(y.data(), y0);
  EXPECT_EQ(dx.data(), dx0);
}

}  // namespace
}  // namespace cohort
