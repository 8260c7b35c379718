#include "worker/layers/conv_transpose.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

ConvTransposeOptions Options(int64_t oc, int64_t k, int64_t s = 1,
                             int64_t p = 0, int64_t op = 0, int64_t groups = 1,
                             bool bias = true) {
  ConvTransposeOptions o;
  o.out_channels = oc;
  o.kernel = k;
  o.stride = s;
  o.padding = p;
  o.output_padding = op;
  o.groups = groups;
  o.bias = bias;
  return o;
}

Shape Batch(const Shape& per_sample, int64_t n) {
  Shape s = per_sample;
  s.insert(s.begin() + 1, n);
  return s;
}

void ExpectGradientsOk(const ConvTransposeOptions& o, const Shape& in,
                       bool check_input = true) {
  ConvTranspose2d<double> layer(o);
  GradCheckOptions g;
  g.check_input = check_input;
  const absl::Status s = CheckLayerGradients(layer, in, Batch(in, 2), g);
  EXPECT_TRUE(s.ok()) << layer.Name() << ": " << s;
}

TEST(ConvTranspose2d, ShapesParamsAndName) {
  ConvTranspose2d<float> layer(Options(4, 3, 2, 1, 1));
  EXPECT_EQ(*layer.Configure({6, 5, 7}), (Shape{4, 10, 14}));
  EXPECT_EQ(layer.Name(), "conv_transpose2d(6->4, k3, s2, p1, op1)");
  const auto p = layer.Params();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].shape, (Shape{6, 4, 3, 3}));
  EXPECT_EQ(p[0].fan_in, 36);  // PyTorch: weight.size(1) * K * K
  EXPECT_EQ(p[1].shape, (Shape{4}));
  ConvTranspose2d<float> grouped(Options(6, 2, 2, 0, 0, 2, false));
  EXPECT_EQ(*grouped.Configure({4, 3, 3}), (Shape{6, 6, 6}));
  EXPECT_EQ(grouped.Params().size(), 1u);
  EXPECT_EQ(grouped.Params()[0].shape, (Shape{4, 3, 2, 2}));
}

TEST(ConvTranspose2d, ConfigureRejectsBadOptionsAndShapes) {
  EXPECT_FALSE(ConvTranspose2d<float>(Options(4, 3, 2, 0, 2))
                   .Configure({2, 4, 4})
                   .ok());  // output_padding >= stride
  EXPECT_FALSE(ConvTranspose2d<float>(Options(4, 3, 1, 0, 0, 3))
                   .Configure({3, 4, 4})
                   .ok());  // groups do not divide out_channels
  EXPECT_FALSE(ConvTranspose2d<float>(Options(4, 3)).Configure({2, 4}).ok());
  const absl::Status s =
      ConvTranspose2d<float>(Options(4, 1, 1, 1)).Configure({2, 1, 1}).status();
  EXPECT_NE(s.message().find("leaves no output"), std::string::npos) << s;
}

TEST(ConvTranspose2d, Gradients) {
  ExpectGradientsOk(Options(3, 3), {2, 4, 5});
  ExpectGradientsOk(Options(3, 3, 2, 1, 1), {2, 4, 3});
  ExpectGradientsOk(Options(2, 4, 2, 1), {3, 3, 3});
  ExpectGradientsOk(Options(4, 3, 2, 0, 1, 2, false), {4, 3, 4});
  ExpectGradientsOk(Options(2, 1, 1, 0), {3, 3, 3});  // a matrix product
  // Groups = the adjoint convolution's input channels: its depthwise path.
  ExpectGradientsOk(Options(2, 3, 1, 1, 0, 2), {4, 4, 4});
  ExpectGradientsOk(Options(3, 3, 3, 2, 2), {2, 3, 3}, false);
}

// A 1x1 input spreads its value over the kernel: the output is the kernel
// times the input plus the bias, cut by the padding.
TEST(ConvTranspose2d, ForwardMatchesHandComputedValues) {
  ConvTranspose2d<float> layer(Options(1, 3, 2, 0, 1));
  ASSERT_EQ(*layer.Configure({1, 2, 1}), (Shape{1, 6, 4}));
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  float* v = store.values().data();
  for (int i = 0; i < 9; ++i) v[store.entries()[0].offset + i] = i + 1;
  v[store.entries()[1].offset] = 0.5f;
  Tensor in({1, 1, 2, 1});
  in[0] = 1;
  in[1] = 10;
  Tensor out;
  layer.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), (Shape{1, 1, 6, 4}));
  // Rows 0-2 hold the kernel, rows 2-4 ten times it (row 2 both), row 5
  // and column 3 only the output padding's bias.
  const float want[24] = {1.5,  2.5,  3.5,  0.5, 4.5,  5.5,  6.5,  0.5,
                          17.5, 28.5, 39.5, 0.5, 40.5, 50.5, 60.5, 0.5,
                          70.5, 80.5, 90.5, 0.5, 0.5,  0.5,  0.5,  0.5};
  for (int i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(out[i], want[i]) << i;
}

// Float (the AVX2 stride-1 kernels, im2col for strides) against double.
void CheckFloatMatchesDouble(const ConvTransposeOptions& o, const Shape& in,
                             int64_t n) {
  ConvTranspose2d<float> lf(o);
  ConvTranspose2d<double> ld(o);
  ASSERT_TRUE(lf.Configure(in).ok());
  ASSERT_TRUE(ld.Configure(in).ok());
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

TEST(ConvTranspose2d, FloatMatchesDouble) {
  CheckFloatMatchesDouble(Options(8, 5, 1, 2), {16, 12, 12}, 3);
  CheckFloatMatchesDouble(Options(6, 3), {4, 9, 10}, 2);
  CheckFloatMatchesDouble(Options(4, 4, 2, 1), {8, 6, 6}, 2);
  CheckFloatMatchesDouble(Options(6, 3, 2, 1, 1, 2), {4, 5, 5}, 2);
}

}  // namespace
}  // namespace cohort
