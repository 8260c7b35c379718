#include "worker/layers/dropout.h"

#include <cmath>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  Dropout<float> drop(0.3);
  ASSERT_TRUE(drop.Configure({1000}).ok());
  drop.SeedRandom(42);
  Tensor in({100, 1000});
  in.Fill(2.0f);
  Tensor out;
  drop.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), in.shape());
  int64_t zeros = 0;
  for (int64_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0.0f) {
      ++zeros;
    } else {
      ASSERT_FLOAT_EQ(out[i], 2.0f / 0.7f) << i;
    }
  }
  // 10^5 Bernoulli(0.3) draws: standard deviation ~145.
  EXPECT_NEAR(static_cast<double>(zeros), 30000.0, 1000.0);
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  Dropout<double> drop(0.5);
  ASSERT_TRUE(drop.Configure({257}).ok());
  TensorD in({3, 257}), out, grad_in, grad_out({3, 257});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 1.0 + i;
  grad_out.Fill(1.0);
  drop.Forward(in, &out, Mode::kTrain);
  drop.Backward(grad_out, &grad_in);
  for (int64_t i = 0; i < in.size(); ++i) {
    // out = in * g where g is the gradient factor of element i.
    ASSERT_DOUBLE_EQ(out[i], in[i] * grad_in[i]) << i;
    ASSERT_TRUE(grad_in[i] == 0.0 || grad_in[i] == 2.0) << grad_in[i];
  }
}

TEST(Dropout, SameSeedSameMaskOtherSeedOtherMask) {
  Dropout<float> a(0.5), b(0.5);
  ASSERT_TRUE(a.Configure({64}).ok());
  ASSERT_TRUE(b.Configure({64}).ok());
  Tensor in({4, 64}), oa, ob, oc;
  in.Fill(1.0f);
  a.SeedRandom(5);
  b.SeedRandom(5);
  a.Forward(in, &oa, Mode::kTrain);
  b.Forward(in, &ob, Mode::kTrain);
  b.SeedRandom(6);
  b.Forward(in, &oc, Mode::kTrain);
  int64_t differ = 0;
  for (int64_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(oa[i], ob[i]) << i;
    differ += oa[i] != oc[i];
  }
  EXPECT_GT(differ, 0);
}

TEST(Dropout, EvalIsIdentity) {
  Dropout<float> drop(0.9);
  ASSERT_TRUE(drop.Configure({5}).ok());
  Tensor in({2, 5}), out, grad_in, grad_out({2, 5});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = grad_out[i] = i - 3.5f;
  drop.Forward(in, &out, Mode::kEval);
  drop.Backward(grad_out, &grad_in);
  for (int64_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i], in[i]);
    EXPECT_EQ(grad_in[i], grad_out[i]);
  }
}

TEST(Dropout, GradientsMatchFiniteDifferences) {
  Dropout<double> drop(0.4);
  const absl::Status s = CheckLayerGradients(drop, {3, 5, 5}, {3, 4, 5, 5});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Dropout, RejectsProbabilityOutsideZeroOne) {
  for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    Dropout<float> drop(p);
    const absl::Status s = drop.Configure({4}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << p;
    EXPECT_NE(s.message().find("probability p must be in [0, 1)"),
              std::string::npos)
        << s;
  }
  Dropout<float> zero(0.0);
  EXPECT_TRUE(zero.Configure({4}).ok());
}

}  // namespace
}  // namespace cohort
