#include "worker/layers/conv.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

ConvOptions Options(int64_t oc, int64_t k, int64_t s = 1, int64_t p = 0,
                    bool bias = true) {
  ConvOptions o;
  o.out_channels = oc;
  o.kernel = k;
  o.stride = s;
  o.padding = p;
  o.bias = bias;
  return o;
}

// Per-sample {C, H, W} -> batch-inner {C, N, H, W}.
Shape Batch(const Shape& per_sample, int64_t n) {
  Shape s = per_sample;
  s.insert(s.begin() + 1, n);
  return s;
}

void ExpectGradientsOk(Layer<double>& layer, const Shape& in, int64_t n,
                       bool check_input = true) {
  GradCheckOptions o;
  o.check_input = check_input;
  const absl::Status s = CheckLayerGradients(layer, in, Batch(in, n), o);
  EXPECT_TRUE(s.ok()) << layer.Name() << ": " << s;
}

ConvOptions Grouped(int64_t oc, int64_t k, int64_t s, int64_t p, int64_t groups,
                    int64_t dilation) {
  ConvOptions o = Options(oc, k, s, p);
  o.groups = groups;
  o.dilation = dilation;
  return o;
}

TEST(Conv2d, GradientsDepthwise) {
  Conv2d<double> layer(Grouped(4, 3, 1, 1, 4, 1));
  ExpectGradientsOk(layer, {4, 6, 5}, 2);
  EXPECT_EQ(layer.Params()[0].shape, Shape({4, 1, 3, 3}));
  EXPECT_EQ(layer.Name(), "conv2d(4->4, k3, p1, g4)");
}

TEST(Conv2d, GradientsDepthwiseMultiplier2Stride2) {
  Conv2d<double> layer(Grouped(6, 3, 2, 1, 3, 1));
  ExpectGradientsOk(layer, {3, 7, 6}, 3);
}

TEST(Conv2d, GradientsGrouped) {
  Conv2d<double> layer(Grouped(6, 3, 1, 1, 2, 1));
  ExpectGradientsOk(layer, {4, 5, 5}, 2);
  EXPECT_EQ(layer.Params()[0].shape, Shape({6, 2, 3, 3}));
}

TEST(Conv2d, GradientsDilated) {
  Conv2d<double> layer(Grouped(3, 3, 1, 2, 1, 2));
  ExpectGradientsOk(layer, {2, 6, 7}, 2);
}

TEST(Conv2d, GradientsGroupedDilatedStrided) {
  Conv2d<double> layer(Grouped(4, 3, 2, 1, 2, 2));
  ExpectGradientsOk(layer, {2, 9, 8}, 2);
}

TEST(Conv1d, GradientsDepthwiseAndDilated) {
  Conv1d<double> dw(Grouped(3, 3, 1, 1, 3, 1));
  ExpectGradientsOk(dw, {3, 11}, 2);
  Conv1d<double> dil(Grouped(4, 3, 1, 2, 2, 2));
  ExpectGradientsOk(dil, {2, 12}, 2);
}

TEST(Conv2d, RejectsGroupsThatDoNotDivideTheChannels) {
  Conv2d<float> layer(Grouped(6, 3, 1, 1, 3, 1));
  const absl::Status s = layer.Configure({4, 8, 8}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a multiple of groups 3"), std::string::npos)
      << s;
  Conv2d<float> dilated(Grouped(6, 3, 1, 0, 1, 4));
  EXPECT_NE(dilated.Configure({1, 8, 8}).status().message().find(
                "smaller than the kernel"),
            std::string::npos);
}

TEST(Conv2d, GradientsStride1Padding0) {
  Conv2d<double> layer(Options(3, 3));
  ExpectGradientsOk(layer, {2, 6, 5}, 2);
}

TEST(Conv2d, GradientsStride1Padding2) {
  Conv2d<double> layer(Options(4, 5, 1, 2));
  ExpectGradientsOk(layer, {2, 5, 6}, 2);
}

TEST(Conv2d, GradientsStride2Padding0) {
  Conv2d<double> layer(Options(3, 3, 2, 0));
  ExpectGradientsOk(layer, {2, 7, 8}, 2);
}

TEST(Conv2d, GradientsStride2Padding2WithoutBias) {
  Conv2d<double> layer(Options(3, 3, 2, 2, /*bias=*/false));
  ExpectGradientsOk(layer, {2, 5, 5}, 2);
  EXPECT_EQ(layer.Params().size(), 1u);
}

TEST(Conv2d, GradientsWithoutBias) {
  Conv2d<double> layer(Options(2, 2, 1, 0, /*bias=*/false));
  ExpectGradientsOk(layer, {3, 4, 4}, 3);
}

TEST(Conv2d, ParameterGradientsWithoutInputGradient) {
  // The first layer of a model gets grad_in == nullptr.
  Conv2d<double> layer(Options(3, 3, 1, 1));
  ExpectGradientsOk(layer, {1, 5, 5}, 2, /*check_input=*/false);
}

TEST(Conv1d, GradientsPadding1) {
  Conv1d<double> layer(Options(4, 3, 1, 1));
  ExpectGradientsOk(layer, {3, 9}, 2);
}

TEST(Conv1d, GradientsStride2WithoutBias) {
  Conv1d<double> layer(Options(2, 3, 2, 1, /*bias=*/false));
  ExpectGradientsOk(layer, {2, 10}, 2);
}

TEST(Conv2d, ForwardMatchesHandComputedValues) {
  // 1 channel 3x3 input, padding 1, 3x3 filter of ones, bias 1: every
  // output is 1 + the sum of its (zero-padded) 3x3 neighbourhood.
  Conv2d<float> layer(Options(1, 3, 1, 1));
  ASSERT_EQ(*layer.Configure({1, 3, 3}), (Shape{1, 3, 3}));
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  float* v = store.values().data();
  for (int i = 0; i < 9; ++i) v[store.entries()[0].offset + i] = 1;
  v[store.entries()[1].offset] = 1;
  Tensor in({1, 1, 3, 3});
  for (int i = 0; i < 9; ++i) in[i] = static_cast<float>(i + 1);
  Tensor out;
  layer.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), (Shape{1, 1, 3, 3}));
  const float want[9] = {13, 22, 17, 28, 46, 34, 25, 40, 29};
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(out[i], want[i]) << i;
}

// Float layer vs double layer with identical parameters and data, on
// shapes that take the AVX2 path (stride 1) and the im2col path (stride 2).
template <template <typename> class L>
void CheckFloatMatchesDouble(const ConvOptions& o, const Shape& in, int64_t n) {
  L<float> lf(o);
  L<double> ld(o);
  ASSERT_TRUE(lf.Configure(in).ok());
  ASSERT_TRUE(ld.Configure(in).ok());
  ParamStore<float> sf;
  ParamStore<double> sd;
  Layer<float>* lfs[] = {&lf};
  Layer<double>* lds[] = {&ld};
  sf.Build(lfs);
  sd.Build(lds);
  Rng rng(11);
  sd.Initialize(rng);
  for (int64_t i = 0; i < sd.values().size(); ++i) {
    sf.values()[i] = static_cast<float>(sd.values()[i]);
  }
  std::normal_distribution<double> normal;
  TensorD xd(Batch(in, n)), yd, dxd;
  Tensor xf(Batch(in, n)), yf, dxf;
  for (int64_t i = 0; i < xd.size(); ++i) xf[i] = xd[i] = normal(rng);
  lf.Forward(xf, &yf, Mode::kTrain);
  ld.Forward(xd, &yd, Mode::kTrain);
  TensorD gd(yd.shape());
  Tensor gf(yd.shape());
  for (int64_t i = 0; i < gd.size(); ++i) gf[i] = gd[i] = normal(rng);
  lf.Backward(gf, &dxf);
  ld.Backward(gd, &dxd);
  auto expect_close = [&](const auto& a, const TensorD& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    double scale = 1e-30;
    for (int64_t i = 0; i < b.size(); ++i) {
      scale = std::max(scale, std::abs(b[i]));
    }
    for (int64_t i = 0; i < b.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-5 * scale) << lf.Name() << " " << what << i;
    }
  };
  expect_close(yf, yd, "output");
  expect_close(dxf, dxd, "input gradient");
  expect_close(sf.grads(), sd.grads(), "parameter gradients");
}

TEST(Conv2d, FloatMatchesDouble) {
  CheckFloatMatchesDouble<Conv2d>(Options(6, 5), {3, 32, 32}, 3);
  CheckFloatMatchesDouble<Conv2d>(Options(16, 5), {6, 14, 14}, 4);
  CheckFloatMatchesDouble<Conv2d>(Options(6, 5, 1, 2), {1, 28, 28}, 2);
  CheckFloatMatchesDouble<Conv2d>(Options(5, 3, 2, 1), {4, 11, 9}, 2);
}

TEST(Conv1d, FloatMatchesDouble) {
  CheckFloatMatchesDouble<Conv1d>(Options(16, 3, 1, 1), {3, 300}, 2);
  CheckFloatMatchesDouble<Conv1d>(Options(3, 3, 1, 1), {32, 100}, 2);
  CheckFloatMatchesDouble<Conv1d>(Options(4, 5, 3, 2), {2, 50}, 2);
}

// Conv2d's per-dim window: kernel [h, w], stride [h, w], padding top,
// left, bottom, right.
ConvOptions Window(int64_t oc, std::vector<int64_t> k, std::vector<int64_t> s,
                   std::vector<int64_t> p, int64_t dilation = 1,
                   int64_t groups = 1) {
  ConvOptions o = Options(oc, 0);
  o.groups = groups;
  o.window =
      ConvWindow{k[0], k[1], s[0], s[1], p[0], p[2], p[1], p[3], dilation};
  return o;
}

TEST(Conv2d, GradientsRectangularWindows) {
  const struct {
    ConvOptions o;
    Shape in;
  } cases[] = {
      {Window(3, {1, 7}, {1, 1}, {0, 3, 0, 3}), {2, 5, 9}},
      {Window(3, {7, 1}, {1, 1}, {3, 0, 3, 0}), {2, 9, 4}},
      {Window(3, {3, 3}, {2, 1}, {1, 1, 1, 1}), {2, 7, 6}},
      {Window(3, {1, 3}, {1, 2}, {0, 1, 0, 1}), {2, 5, 7}},
      // SAME with even kernels: the odd zero below and to the right.
      {Window(3, {4, 2}, {1, 1}, {1, 0, 2, 1}), {2, 6, 5}},
      {Window(2, {3, 3}, {1, 1}, {2, 2, 2, 2}, 2), {2, 7, 6}},
      {Window(4, {2, 3}, {1, 1}, {0, 2, 1, 2}, 2, 2), {2, 5, 6}},
      // Depthwise: its direct kernels take a rectangular window; an uneven
      // one runs per group.
      {Window(4, {1, 7}, {1, 1}, {0, 3, 0, 3}, 1, 4), {4, 4, 9}},
      {Window(4, {2, 2}, {1, 1}, {0, 0, 1, 1}, 1, 4), {4, 5, 5}},
  };
  for (const auto& c : cases) {
    Conv2d<double> layer(c.o);
    ExpectGradientsOk(layer, c.in, 2);
  }
}

TEST(Conv2d, RectangularShapesAndName) {
  Conv2d<float> layer(Window(4, {1, 7}, {2, 1}, {0, 3, 0, 3}));
  EXPECT_EQ(*layer.Configure({3, 9, 10}), (Shape{4, 5, 10}));
  EXPECT_EQ(layer.Name(), "conv2d(3->4, k1x7, s2x1, p0x3)");
  EXPECT_EQ(layer.Params()[0].shape, (Shape{4, 3, 1, 7}));
  EXPECT_EQ(layer.Params()[0].fan_in, 21);
  Conv2d<float> same(Window(2, {4, 4}, {1, 1}, {1, 1, 2, 2}));
  EXPECT_EQ(*same.Configure({1, 6, 5}), (Shape{2, 6, 5}));
  EXPECT_EQ(same.Name(), "conv2d(1->2, k4x4, p1,1,2,2)");
}

TEST(Conv2d, RectangularFloatMatchesDouble) {
  CheckFloatMatchesDouble<Conv2d>(Window(16, {1, 7}, {1, 1}, {0, 3, 0, 3}),
                                  {16, 12, 12}, 3);
  CheckFloatMatchesDouble<Conv2d>(Window(8, {7, 1}, {1, 1}, {3, 0, 3, 0}),
                                  {6, 14, 10}, 2);
  CheckFloatMatchesDouble<Conv2d>(Window(5, {3, 3}, {2, 1}, {1, 1, 1, 1}),
                                  {4, 11, 9}, 2);
  CheckFloatMatchesDouble<Conv2d>(Window(6, {2, 4}, {1, 1}, {0, 1, 1, 2}),
                                  {3, 10, 9}, 2);
}

TEST(Conv2d, ConfigureRejectsBadShapes) {
  Conv2d<float> layer(Options(16, 5));
  absl::StatusOr<Shape> r = layer.Configure({6, 3, 3});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "conv2d(6->16, k5): input [6, 3, 3] is smaller than the kernel");
  r = Conv2d<float>(Options(16, 5, 1, 1)).Configure({6, 2, 9});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "conv2d(6->16, k5, p1): input [6, 2, 9] padded by 1 is smaller "
            "than the kernel");
  r = layer.Configure({400});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "conv2d(?->16, k5): expects a per-sample input {C, H, W} but got "
            "[400]");
  EXPECT_FALSE(layer.Configure({0, 8, 8}).ok());
  EXPECT_EQ(
      Conv2d<float>(Options(0, 5)).Configure({1, 8, 8}).status().message(),
      "conv2d(?->0, k5): out_channels must be positive, got 0");
  EXPECT_FALSE(Conv2d<float>(Options(4, 0)).Configure({1, 8, 8}).ok());
  EXPECT_FALSE(Conv2d<float>(Options(4, 3, 0)).Configure({1, 8, 8}).ok());
  EXPECT_FALSE(Conv2d<float>(Options(4, 3, 1, -1)).Configure({1, 8, 8}).ok());
  EXPECT_FALSE(Conv1d<float>(Options(4, 3)).Configure({1, 8, 8}).ok());
  EXPECT_FALSE(Conv1d<float>(Options(4, 3)).Configure({1, 2}).ok());
}

TEST(Conv2d, ShapesAndParams) {
  Conv2d<float> layer(Options(6, 5, 1, 2));
  EXPECT_EQ(*layer.Configure({1, 28, 28}), (Shape{6, 28, 28}));
  EXPECT_EQ(layer.Name(), "conv2d(1->6, k5, p2)");
  const auto p = layer.Params();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].shape, (Shape{6, 1, 5, 5}));
  EXPECT_EQ(p[0].fan_in, 25);
  EXPECT_EQ(p[1].shape, (Shape{6}));
  Conv2d<float> strided(Options(4, 3, 2));
  EXPECT_EQ(*strided.Configure({3, 9, 8}), (Shape{4, 4, 3}));
  Conv1d<float> c1(Options(32, 3, 1, 1, /*bias=*/false));
  EXPECT_EQ(*c1.Configure({16, 10000}), (Shape{32, 10000}));
  EXPECT_EQ(c1.Name(), "conv1d(16->32, k3, p1, no bias)");
  EXPECT_EQ(c1.Params()[0].shape, (Shape{32, 16, 3}));
  EXPECT_EQ(c1.Params()[0].fan_in, 48);
}

TEST(Conv2d, StepsReuseBuffers) {
  Conv2d<float> layer(Options(4, 3, 1, 1));
  ASSERT_TRUE(layer.Configure({2, 6, 6}).ok());
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  Tensor x({2, 3, 6, 6}), y, dx;
  layer.Forward(x, &y, Mode::kTrain);
  Tensor g(y.shape());
  layer.Backward(g, &dx);
  const float* y0 = y.data();
  const float* dx0 = dx.data();
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(g, &dx);
  EXPECT_EQ(y.data(), y0);
  EXPECT_EQ(dx.data(), dx0);
  EXPECT_EQ(dx.shape(), x.shape());
}

}  // namespace
}  // namespace cohort
