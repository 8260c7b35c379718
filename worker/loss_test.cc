#include "worker/loss.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(SoftmaxCrossEntropy, MatchesHandComputedValues) {
  // Row 0: logits (1, 2, 3), label 2; row 1: (0, 0, 0), label 0.
  TensorD logits({2, 3});
  const double v[] = {1, 2, 3, 0, 0, 0};
  for (int i = 0; i < 6; ++i) logits[i] = v[i];
  const std::vector<int32_t> labels = {2, 0};
  TensorD grad;
  int64_t correct = 0;
  const double loss =
      SoftmaxCrossEntropy<double>(logits, labels, &grad, &correct);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double row0 = std::log(z) - 3.0, row1 = std::log(3.0);
  EXPECT_NEAR(loss, (row0 + row1) / 2, 1e-12);
  // Row 0's argmax is its label; row 1 ties and takes index 0, its label.
  EXPECT_EQ(correct, 2);
  ASSERT_EQ(grad.shape(), Shape({2, 3}));
  EXPECT_NEAR(grad[0], std::exp(1.0) / z / 2, 1e-12);
  EXPECT_NEAR(grad[1], std::exp(2.0) / z / 2, 1e-12);
  EXPECT_NEAR(grad[2], (std::exp(3.0) / z - 1) / 2, 1e-12);
  EXPECT_NEAR(grad[3], (1.0 / 3 - 1) / 2, 1e-12);
  EXPECT_NEAR(grad[4], 1.0 / 6, 1e-12);
}

TEST(SoftmaxCrossEntropy, CountsWrongPredictions) {
  Tensor logits({3, 2});
  const float v[] = {5, 1, 1, 5, 2, 0};
  for (int i = 0; i < 6; ++i) logits[i] = v[i];
  const std::vector<int32_t> labels = {0, 0, 1};
  int64_t correct = 10;  // accumulates
  SoftmaxCrossEntropy<float>(logits, labels, nullptr, &correct);
  EXPECT_EQ(correct, 11);
}

TEST(SoftmaxCrossEntropy, LargeLogitsStayFinite) {
  Tensor logits({1, 3});
  logits[0] = 1000.0f;
  logits[1] = 999.0f;
  logits[2] = -1000.0f;
  const std::vector<int32_t> labels = {1};
  Tensor grad;
  const float loss = SoftmaxCrossEntropy<float>(logits, labels, &grad);
  EXPECT_NEAR(loss, 1.0 + std::log1p(std::exp(-1.0)), 1e-5);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(grad[i])) << i;
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  TensorD logits({4, 5});
  for (int64_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(2.1 * i);
  const std::vector<int32_t> labels = {0, 4, 2, 2};
  TensorD grad, unused;
  SoftmaxCrossEntropy<double>(logits, labels, &grad);
  const double h = 1e-6;
  for (int64_t i = 0; i < logits.size(); ++i) {
    const double saved = logits[i];
    logits[i] = saved + h;
    const double lp = SoftmaxCrossEntropy<double>(logits, labels, &unused);
    logits[i] = saved - h;
    const double lm = SoftmaxCrossEntropy<double>(logits, labels, &unused);
    logits[i] = saved;
    EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-8) << i;
  }
}

TEST(MeanSquaredError, MatchesHandComputedValues) {
  Tensor pred({2, 2}), target({2, 2}), grad;
  const float p[] = {1, 2, 3, 4}, t[] = {0, 2, 5, 3};
  for (int i = 0; i < 4; ++i) pred[i] = p[i], target[i] = t[i];
  // Squared errors 1, 0, 4, 1: mean 1.5.
  EXPECT_FLOAT_EQ(MeanSquaredError<float>(pred, target, &grad), 1.5f);
  ASSERT_EQ(grad.shape(), pred.shape());
  const float expected[] = {0.5f, 0.0f, -1.0f, 0.5f};  // 2 (p - t) / 4
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(grad[i], expected[i]) << i;
}

TEST(MeanSquaredError, GradientMatchesFiniteDifferences) {
  TensorD pred({3, 4}), target({3, 4}), grad, unused;
  for (int64_t i = 0; i < pred.size(); ++i) {
    pred[i] = std::cos(0.9 * i);
    target[i] = std::sin(1.7 * i);
  }
  MeanSquaredError<double>(pred, target, &grad);
  const double h = 1e-6;
  for (int64_t i = 0; i < pred.size(); ++i) {
    const double saved = pred[i];
    pred[i] = saved + h;
    const double lp = MeanSquaredError<double>(pred, target, &unused);
    pred[i] = saved - h;
    const double lm = MeanSquaredError<double>(pred, target, &unused);
    pred[i] = saved;
    EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-8) << i;
  }
}

}  // namespace
}  // namespace cohort
