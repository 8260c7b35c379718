#include "worker/layers/activation.h"

#include <cmath>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

TEST(ReLU, ForwardZeroesNegatives) {
  ReLU<float> relu;
  ASSERT_TRUE(relu.Configure({5}).ok());
  Tensor in({1, 5});
  const float values[] = {-2.0f, -0.0f, 0.5f, 3.0f, -1e-30f};
  for (int i = 0; i < 5; ++i) in[i] = values[i];
  Tensor out;
  relu.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), in.shape());
  const float expected[] = {0.0f, 0.0f, 0.5f, 3.0f, 0.0f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

TEST(ReLU, FloatMatchesDoubleOnLongInput) {
  // Long enough to run the vectorized loop and its scalar tail.
  ReLU<float> f;
  ReLU<double> d;
  Tensor xf({3, 2, 37});
  TensorD xd({3, 2, 37});
  for (int64_t i = 0; i < xf.size(); ++i) {
    xd[i] = std::sin(0.7 * i);
    xf[i] = static_cast<float>(xd[i]);
  }
  Tensor of, gf, rf({3, 2, 37});
  TensorD od, gd, rd({3, 2, 37});
  for (int64_t i = 0; i < rf.size(); ++i) rf[i] = rd[i] = i % 7 - 3;
  f.Forward(xf, &of, Mode::kTrain);
  d.Forward(xd, &od, Mode::kTrain);
  f.Backward(rf, &gf);
  d.Backward(rd, &gd);
  for (int64_t i = 0; i < xf.size(); ++i) {
    EXPECT_FLOAT_EQ(of[i], static_cast<float>(od[i])) << i;
    EXPECT_EQ(gf[i], static_cast<float>(gd[i])) << i;
  }
}

TEST(ReLU, GradientsMatchFiniteDifferencesDense) {
  ReLU<double> relu;
  EXPECT_TRUE(CheckLayerGradients(relu, {7}, {4, 7}).ok());
}

TEST(ReLU, GradientsMatchFiniteDifferencesSpatial) {
  ReLU<double> relu;
  const absl::Status s = CheckLayerGradients(relu, {2, 3, 5}, {2, 3, 3, 5});
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace cohort
