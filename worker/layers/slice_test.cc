// slice: the window of each sample, its gradient scattered back into zeros,
// the refusals of Configure, and float against double.
#include "worker/layers/slice.h"

#include <string>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

TEST(Slice, CopiesEachSamplesWindow) {
  Slice<double> layer(1, 4);
  const absl::StatusOr<Shape> out_shape = layer.Configure({6});
  ASSERT_TRUE(out_shape.ok()) << out_shape.status();
  EXPECT_EQ(*out_shape, (Shape{3}));
  EXPECT_EQ(layer.Name(), "slice(1, 4)");
  TensorD in({2, 6});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i);
  TensorD out;
  layer.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), (Shape{2, 3}));
  const double want[] = {1, 2, 3, 7, 8, 9};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]) << i;

  TensorD grad_out({2, 3}), grad_in;
  for (int i = 0; i < 6; ++i) grad_out[i] = 10 + i;
  layer.Backward(grad_out, &grad_in);
  ASSERT_EQ(grad_in.shape(), (Shape{2, 6}));
  const double want_grad[] = {0, 10, 11, 12, 0, 0, 0, 13, 14, 15, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(grad_in[i], want_grad[i]) << i;
}

TEST(Slice, WholeRangeAndLastFeature) {
  Slice<float> all(0, 5), last(4, 5);
  EXPECT_EQ(*all.Configure({5}), (Shape{5}));
  EXPECT_EQ(*last.Configure({5}), (Shape{1}));
  Tensor in({3, 5}), out;
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  last.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), (Shape{3, 1}));
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], 9);
  EXPECT_EQ(out[2], 14);
}

TEST(Slice, RefusesBadBoundsAndShapesNamingThem) {
  struct Case {
    int64_t begin, end;
    Shape in;
    std::string error;
  };
  const Case cases[] = {
      {0, 3, {2, 4}, "slice(0, 3): expects a flat input {F} but got [2, 4]"},
      {0, 3, {2, 4, 4}, "expects a flat input {F} but got [2, 4, 4]"},
      {13,
       70,
       {65},
       "slice(13, 70): features [13, 70) are not a non-empty range of the "
       "input's 65 (0 <= begin < end <= 65)"},
      {5, 5, {8}, "features [5, 5) are not a non-empty range"},
      {6, 2, {8}, "features [6, 2) are not a non-empty range"},
      {-1, 2, {8}, "features [-1, 2) are not a non-empty range"},
  };
  for (const Case& c : cases) {
    Slice<float> layer(c.begin, c.end);
    const absl::StatusOr<Shape> out = layer.Configure(c.in);
    ASSERT_FALSE(out.ok()) << c.error;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(c.error), std::string::npos)
        << out.status();
  }
}

TEST(Slice, GradientsMatchFiniteDifferences) {
  Slice<double> layer(3, 10);
  const absl::Status s = CheckLayerGradients(layer, {12}, {5, 12});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Slice, FloatAndDoubleAgree) {
  Slice<float> f(2, 9);
  Slice<double> d(2, 9);
  ASSERT_TRUE(f.Configure({11}).ok());
  ASSERT_TRUE(d.Configure({11}).ok());
  Tensor xf({4, 11}), gf({4, 7}), yf, dxf;
  TensorD xd({4, 11}), gd({4, 7}), yd, dxd;
  for (int64_t i = 0; i < xf.size(); ++i) xd[i] = xf[i] = 0.25f * i - 3;
  for (int64_t i = 0; i < gf.size(); ++i) gd[i] = gf[i] = 1.5f - 0.125f * i;
  f.Forward(xf, &yf, Mode::kTrain);
  d.Forward(xd, &yd, Mode::kTrain);
  f.Backward(gf, &dxf);
  d.Backward(gd, &dxd);
  ASSERT_EQ(yf.shape(), yd.shape());
  ASSERT_EQ(dxf.shape(), dxd.shape());
  for (int64_t i = 0; i < yf.size(); ++i) EXPECT_EQ(yf[i], yd[i]) << i;
  for (int64_t i = 0; i < dxf.size(); ++i) EXPECT_EQ(dxf[i], dxd[i]) << i;
}

}  // namespace
}  // namespace cohort
