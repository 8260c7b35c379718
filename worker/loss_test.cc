#include "worker/loss.h"

#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"

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

TEST(SoftmaxCrossEntropy, LabelSmoothingMatchesTheDefinition) {
  // PyTorch's definition: (1 - e) nll(label) + e mean_j nll(j).
  TensorD logits({1, 3}), grad;
  logits[0] = 0.5, logits[1] = -1, logits[2] = 2;
  const std::vector<int32_t> labels = {1};
  const double e = 0.2;
  const double z = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0);
  const double nll[3] = {std::log(z) - 0.5, std::log(z) + 1, std::log(z) - 2};
  const double expected = (1 - e) * nll[1] + e * (nll[0] + nll[1] + nll[2]) / 3;
  EXPECT_NEAR(SoftmaxCrossEntropy<double>(logits, labels, &grad, nullptr, e),
              expected, 1e-12);
  // Gradient: softmax - ((1 - e) onehot + e / 3).
  const double sm[3] = {std::exp(0.5) / z, std::exp(-1.0) / z,
                        std::exp(2.0) / z};
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(grad[j], sm[j] - (j == 1 ? 1 - e : 0) - e / 3, 1e-12) << j;
  }
}

TEST(CountTopK, CountsLabelsAmongTheLargestLogits) {
  Tensor logits({3, 4});
  const float v[] = {4, 3, 2, 1,   // label 2 is third: top-2 misses it
                     1, 1, 1, 1,   // ties: label 1 ranks second
                     0, 9, 8, 7};  // label 0 is last
  for (int i = 0; i < 12; ++i) logits[i] = v[i];
  const std::vector<int32_t> labels = {2, 1, 0};
  EXPECT_EQ(CountTopK<float>(logits, labels, 1), 0);
  EXPECT_EQ(CountTopK<float>(logits, labels, 2), 1);
  EXPECT_EQ(CountTopK<float>(logits, labels, 3), 2);
  EXPECT_EQ(CountTopK<float>(logits, labels, 5), 3);
}

TEST(ElementwiseLoss, MatchesHandComputedValues) {
  Tensor pred({4}), target({4}), grad;
  const float p[] = {1, 2, 3, -4}, t[] = {0, 2, 5, -3.5};
  for (int i = 0; i < 4; ++i) pred[i] = p[i], target[i] = t[i];
  // Differences 1, 0, -2, -0.5.
  EXPECT_FLOAT_EQ(
      ElementwiseLoss<float>(ElementLoss::kL1, 1, pred, target, &grad),
      3.5f / 4);
  const float l1_grad[] = {0.25f, 0, -0.25f, -0.25f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(grad[i], l1_grad[i]) << i;
  // Huber, delta 1: 0.5 (|x| = 1 is linear: 1 - 0.5), 0, 2 - 0.5, 0.125.
  EXPECT_FLOAT_EQ(
      ElementwiseLoss<float>(ElementLoss::kHuber, 1, pred, target, &grad),
      (0.5f + 0 + 1.5f + 0.125f) / 4);
  const float huber_grad[] = {0.25f, 0, -0.25f, -0.125f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(grad[i], huber_grad[i]) << i;
  // BCE with logits: t log(1 + e^-p) + (1 - t) log(1 + e^p) for t in [0, 1].
  Tensor logit({3}), label({3});
  const float lp[] = {0.3f, -2, 40}, lt[] = {1, 0, 0.25f};
  for (int i = 0; i < 3; ++i) logit[i] = lp[i], label[i] = lt[i];
  double expected = 0;
  for (int i = 0; i < 3; ++i) {
    const double x = lp[i], y = lt[i];
    // Written without overflow for x = 40: log(1 + e^x) = x + log1p(e^-x).
    expected +=
        y * std::log1p(std::exp(-x)) + (1 - y) * (x + std::log1p(std::exp(-x)));
  }
  EXPECT_NEAR(ElementwiseLoss<float>(ElementLoss::kBce, 1, logit, label, &grad),
              expected / 3, 1e-5);
  EXPECT_NEAR(grad[2], (1 - 0.25) / 3, 1e-6);  // sigmoid(40) - 0.25
}

// Every loss's gradient against central differences, in double, away from
// the kinks of L1 and Huber.
TEST(ElementwiseLoss, GradientsMatchFiniteDifferences) {
  for (ElementLoss kind : {ElementLoss::kMse, ElementLoss::kL1,
                           ElementLoss::kHuber, ElementLoss::kBce}) {
    TensorD pred({2, 5}), target({2, 5}), grad, unused;
    for (int64_t i = 0; i < pred.size(); ++i) {
      pred[i] = 2.5 * std::cos(0.9 * i);
      target[i] = kind == ElementLoss::kBce ? 0.5 + 0.5 * std::sin(1.7 * i)
                                            : std::sin(1.7 * i);
    }
    ElementwiseLoss<double>(kind, 0.8, pred, target, &grad);
    const double h = 1e-6;
    for (int64_t i = 0; i < pred.size(); ++i) {
      const double saved = pred[i];
      pred[i] = saved + h;
      const double lp =
          ElementwiseLoss<double>(kind, 0.8, pred, target, &unused);
      pred[i] = saved - h;
      const double lm =
          ElementwiseLoss<double>(kind, 0.8, pred, target, &unused);
      pred[i] = saved;
      EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-7)
          << static_cast<int>(kind) << " element " << i;
    }
  }
}

TEST(SoftmaxCrossEntropy, SmoothedGradientMatchesFiniteDifferences) {
  TensorD logits({3, 4}), grad, unused;
  for (int64_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(1.3 * i);
  const std::vector<int32_t> labels = {3, 0, 2};
  SoftmaxCrossEntropy<double>(logits, labels, &grad, nullptr, 0.1);
  const double h = 1e-6;
  for (int64_t i = 0; i < logits.size(); ++i) {
    const double saved = logits[i];
    logits[i] = saved + h;
    const double lp =
        SoftmaxCrossEntropy<double>(logits, labels, &unused, nullptr, 0.1);
    logits[i] = saved - h;
    const double lm =
        SoftmaxCrossEntropy<double>(logits, labels, &unused, nullptr, 0.1);
    logits[i] = saved;
    EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-8) << i;
  }
}

// The sequence loss over {V, N, L} equals the row loss over the same
// logits transposed to {N * L, V}: value, gradient and hits, with and
// without label smoothing.
TEST(SequenceCrossEntropy, EqualsTheRowLossOverEveryPosition) {
  const int64_t v = 7, n = 3, len = 130;  // 390 columns: two blocks
  TensorD seq({v, n, len}), rows({n * len, v});
  std::vector<float> targets(n * len);
  std::vector<int32_t> labels(n * len);
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int64_t j = 0; j < n * len; ++j) {
    labels[j] = static_cast<int32_t>(next() * v);
    targets[j] = static_cast<float>(labels[j]);
    for (int64_t c = 0; c < v; ++c) {
      const double x = 8 * next() - 4;
      seq[c * n * len + j] = x;
      rows[j * v + c] = x;
    }
  }
  const std::vector<float> weights = {0.5f, 2, 1, 0, 3, 1, 0.25f};
  const ClassWeighting none, weighted{weights, 2}, ignoring{{}, 5};
  for (const auto& [smooth, weighting] :
       std::vector<std::pair<double, ClassWeighting>>{
           {0.0, none}, {0.1, none}, {0.0, weighted}, {0.1, ignoring}}) {
    TensorD g_seq, g_rows;
    int64_t hits_seq = 0, hits_rows = 0;
    const double a = SequenceCrossEntropy<double>(seq, targets, &g_seq,
                                                  &hits_seq, smooth, weighting);
    const double b = SoftmaxCrossEntropy<double>(rows, labels, &g_rows,
                                                 &hits_rows, smooth, weighting);
    EXPECT_NEAR(a, b, 1e-12);
    EXPECT_EQ(hits_seq, hits_rows);
    EXPECT_GT(hits_seq, 0);
    ASSERT_EQ(g_seq.shape(), Shape({v, n, len}));
    for (int64_t j = 0; j < n * len; ++j) {
      for (int64_t c = 0; c < v; ++c) {
        ASSERT_NEAR(g_seq[c * n * len + j], g_rows[j * v + c], 1e-15)
            << "column " << j << " class " << c;
      }
    }
    EXPECT_NEAR(SequenceCrossEntropy<double>(seq, targets, nullptr, nullptr,
                                             smooth, weighting),
                a, 1e-15);
  }
}

// PyTorch's CrossEntropyLoss(weight=w, ignore_index=i): sum over rows of
// w[y] (-log softmax(x)[y]), rows of label i left out, over sum w[y].
// Column blocks run on the compute threads and their losses add up in block
// order: loss, gradient and hits have the same bits on one and two threads.
TEST(SequenceCrossEntropy, SameBitsOnOneAndTwoThreads) {
  const int64_t v = 11, n = 4, len = 200;  // 800 columns: four blocks
  Tensor logits({v, n, len});
  std::vector<float> targets(n * len);
  for (int64_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>((i * 7919) % 1013) * 0.01f - 5.0f;
  }
  for (int64_t j = 0; j < n * len; ++j) {
    targets[j] = static_cast<float>((j * 31) % v);
  }
  std::vector<float> runs[2];
  for (int threads : {1, 2}) {
    SetOnednnThreads(threads);
    Tensor grad;
    int64_t hits = 0;
    const float loss =
        SequenceCrossEntropy<float>(logits, targets, &grad, &hits, 0.1f);
    std::vector<float>& r = runs[threads - 1];
    r.assign(grad.data(), grad.data() + grad.size());
    r.push_back(loss);
    r.push_back(static_cast<float>(hits));
  }
  SetOnednnThreads(0);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(SoftmaxCrossEntropy, ClassWeightsAndIgnoredLabelsAsPyTorch) {
  TensorD logits({4, 3});
  const double v[] = {1, 2, 3, 0, 0, 0, -1, 4, 0.5, 2, -2, 1};
  for (int i = 0; i < 12; ++i) logits[i] = v[i];
  const std::vector<int32_t> labels = {2, 0, 1, 1};
  const std::vector<float> w = {0.5f, 2, 1};
  const ClassWeighting weighting{w, 0};  // row 1 is ignored
  double num = 0, den = 0;
  for (int i = 0; i < 4; ++i) {
    if (labels[i] == 0) continue;
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(v[i * 3 + c]);
    num += w[labels[i]] * (std::log(z) - v[i * 3 + labels[i]]);
    den += w[labels[i]];
  }
  TensorD grad;
  const double loss = SoftmaxCrossEntropy<double>(logits, labels, &grad,
                                                  nullptr, 0.0, weighting);
  EXPECT_NEAR(loss, num / den, 1e-12);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(grad[3 + c], 0.0) << c;
  // Finite differences of the weighted loss.
  for (int i = 0; i < 12; ++i) {
    const double h = 1e-6, keep = logits[i];
    logits[i] = keep + h;
    const double up = SoftmaxCrossEntropy<double>(logits, labels, nullptr,
                                                  nullptr, 0.0, weighting);
    logits[i] = keep - h;
    const double down = SoftmaxCrossEntropy<double>(logits, labels, nullptr,
                                                    nullptr, 0.0, weighting);
    logits[i] = keep;
    EXPECT_NEAR(grad[i], (up - down) / (2 * h), 1e-8) << "logit " << i;
  }
  // Every row ignored: nothing to learn from, and no division by zero.
  const std::vector<int32_t> padding = {0, 0, 0, 0};
  EXPECT_EQ(SoftmaxCrossEntropy<double>(logits, padding, &grad, nullptr, 0.0,
                                        weighting),
            0.0);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(grad[i], 0.0) << i;
}

}  // namespace
}  // namespace cohort
