#include "worker/objective.h"

#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Sample i has one feature and, with float targets, the target
// 100 + i (an offset that raw float sums of squares would lose R² to), or
// the class i % 3.
class TinyData : public Dataset {
 public:
  explicit TinyData(bool floats) : target_(floats ? Shape{1} : Shape{}) {}
  // Float targets of shape `target`.
  explicit TinyData(Shape target) : target_(std::move(target)) {}
  int64_t size() const override { return 4; }
  const Shape& sample_shape() const override { return shape_; }
  const Shape& target_shape() const override { return target_; }
  int num_classes() const override { return target_.empty() ? 7 : 0; }
  absl::Status Read(int64_t index, uint64_t, SampleOut& out) const override {
    out.features[0] = index;
    if (target_.empty()) {
      out.label = index % 3;
    } else {
      for (int64_t i = 0; i < NumElements(target_); ++i) {
        out.target[i] = 100 + index;
      }
    }
    return absl::OkStatus();
  }

 private:
  Shape shape_{1};
  Shape target_;
};

JobSpec Spec(LossKind loss) {
  JobSpec spec;
  spec.set_loss(loss);
  return spec;
}

TEST(Objective, RegressionMetricsMatchTheirDefinitions) {
  TinyData data(true);
  const Objective objective(Spec(MSE), data);
  Batch batch;
  batch.targets.Resize({4, 1});
  Tensor out({4, 1}), scratch;
  const double y[] = {100, 101, 102, 103}, p[] = {100.5, 101, 101, 103.5};
  for (int i = 0; i < 4; ++i) batch.targets[i] = y[i], out[i] = p[i];
  EvalSums sums;
  objective.Accumulate(out, batch, &scratch, &sums);
  const Metrics m = objective.Finish(sums);
  // Errors 0.5, 0, -1, 0.5: SSE 1.5; SST around the mean 101.5: 5.
  EXPECT_NEAR(MetricOr(m, "mse", -1), 1.5 / 4, 1e-9);
  EXPECT_NEAR(MetricOr(m, "mae", -1), 2.0 / 4, 1e-9);
  EXPECT_NEAR(MetricOr(m, "r2", -1), 1 - 1.5 / 5, 1e-9);
  EXPECT_NEAR(MetricOr(m, "loss", -1), 1.5 / 4, 1e-6);
  EXPECT_EQ(MetricOr(m, "accuracy", -1), -1);
}

TEST(Objective, ClassMetricsCountTopOneAndTopFive) {
  TinyData data(false);
  const Objective objective(Spec(CROSS_ENTROPY), data);
  Batch batch;
  batch.labels = {0, 6};
  batch.features.Resize({2, 1});
  Tensor out({2, 7}), scratch;
  out.SetZero();
  out[0] = 5;       // row 0: label 0 first
  out[7 + 6] = -1;  // row 1: label 6 last of seven
  EvalSums sums;
  objective.Accumulate(out, batch, &scratch, &sums);
  const Metrics m = objective.Finish(sums);
  EXPECT_EQ(MetricOr(m, "accuracy", -1), 0.5);
  EXPECT_EQ(MetricOr(m, "top5_accuracy", -1), 0.5);
}

TEST(Objective, ChecksTheModelOutputAgainstTheTargets) {
  TinyData floats(true), classes(false);
  EXPECT_TRUE(Objective(Spec(MSE), floats).CheckModelOutput({1}).ok());
  const absl::Status s = Objective(Spec(MSE), floats).CheckModelOutput({3});
  EXPECT_NE(s.message().find("float targets are [1]"), absl::string_view::npos)
      << s;
  EXPECT_TRUE(
      Objective(Spec(CROSS_ENTROPY), classes).CheckModelOutput({7}).ok());
  EXPECT_FALSE(
      Objective(Spec(CROSS_ENTROPY), classes).CheckModelOutput({5}).ok());
}

// MSE on class data compares with one-hot vectors, and still counts the
// top-1 predictions.
TEST(Objective, ExplicitMseOnClassesUsesOneHotTargets) {
  TinyData data(false);
  const Objective objective(Spec(MSE), data);
  Batch batch;
  batch.labels = {2};
  Tensor out({1, 7}), grad, scratch;
  out.SetZero();
  out[2] = 1;
  int64_t correct = 0;
  EXPECT_EQ(objective.Loss(out, batch, &grad, &scratch, &correct), 0);
  EXPECT_EQ(correct, 1);
}

// A click-through-rate evaluation: one logit per sample, 0/1 labels.
EvalSums BinaryEvaluation(const Objective& objective,
                          const std::vector<float>& logits,
                          const std::vector<float>& labels) {
  const int64_t n = static_cast<int64_t>(logits.size());
  Batch batch;
  batch.targets.Resize({n, 1});
  Tensor out({n, 1}), scratch;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = logits[i];
    batch.targets[i] = labels[i];
  }
  EvalSums sums;
  objective.Accumulate(out, batch, &scratch, &sums);
  return sums;
}

double LogLoss(double logit, double label) {
  const double p = 1 / (1 + std::exp(-logit));
  return -(label * std::log(p) + (1 - label) * std::log(1 - p));
}

TEST(Objective, BinaryMetricsMatchTheirDefinitions) {
  TinyData data(true);
  const Objective objective(Spec(BCE_WITH_LOGITS), data);
  EXPECT_TRUE(objective.keeps_scores());
  const std::vector<float> logits = {2, -1, 0.5f, 0.5f, -3, 1};
  const std::vector<float> labels = {1, 0, 1, 0, 0, 0};
  const Metrics m =
      objective.Finish(BinaryEvaluation(objective, logits, labels));
  // Positives {2, 0.5} against negatives {-1, 0.5, -3, 1}: 2 beats all
  // four; 0.5 beats two and ties one.
  EXPECT_EQ(MetricOr(m, "auc", -1), (4 + 2.5) / 8);
  double loss = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    loss += LogLoss(logits[i], labels[i]);
  }
  const double p = 2.0 / 6;
  const double entropy = -(p * std::log(p) + (1 - p) * std::log(1 - p));
  EXPECT_NEAR(MetricOr(m, "normalized_entropy", -1), loss / 6 / entropy, 1e-6);
  EXPECT_NEAR(MetricOr(m, "loss", -1), loss / 6, 1e-6);
  // All but the negatives at 0.5 and 1 are on the right side of 0.
  EXPECT_NEAR(MetricOr(m, "accuracy", -1), 4.0 / 6, 1e-12);
  EXPECT_EQ(m.back().first, "normalized_entropy");
}

// An evaluation split in parts (replicas, workers) and added up gives the
// same AUC to the last bit, whatever the parts' order.
TEST(Objective, BinaryMetricsOfPartsAddUpToTheWhole) {
  TinyData data(true);
  const Objective objective(Spec(BCE_WITH_LOGITS), data);
  const std::vector<float> logits = {0.1f, 0.7f, -0.2f, 0.7f, 1.5f, -2};
  const std::vector<float> labels = {0, 1, 1, 0, 1, 0};
  const Metrics whole =
      objective.Finish(BinaryEvaluation(objective, logits, labels));
  EvalSums parts =
      BinaryEvaluation(objective, {logits.begin() + 4, logits.end()},
                       {labels.begin() + 4, labels.end()});
  parts.Add(BinaryEvaluation(objective, {logits.begin(), logits.begin() + 4},
                             {labels.begin(), labels.begin() + 4}));
  const Metrics split = objective.Finish(parts);
  ASSERT_GT(MetricOr(whole, "auc", -1), 0);
  EXPECT_EQ(MetricOr(split, "auc", -1), MetricOr(whole, "auc", -1));
  // The loss of a batch is a float mean: its sums round differently.
  EXPECT_NEAR(MetricOr(split, "normalized_entropy", -1),
              MetricOr(whole, "normalized_entropy", -1), 1e-6);
}

// As R² of constant targets: undefined, so not reported.
TEST(Objective, BinaryMetricsAreLeftOutForLabelsOfOneClass) {
  TinyData data(true);
  const Objective objective(Spec(BCE_WITH_LOGITS), data);
  for (float label : {0.0f, 1.0f}) {
    const Metrics m = objective.Finish(
        BinaryEvaluation(objective, {0.3f, -1}, {label, label}));
    EXPECT_EQ(MetricOr(m, "auc", -1), -1) << label;
    EXPECT_EQ(MetricOr(m, "normalized_entropy", -1), -1) << label;
    EXPECT_GE(MetricOr(m, "accuracy", -1), 0) << label;
  }
}

TEST(Objective, BinaryMetricsNeedBceOnOneTarget) {
  TinyData one(true), two(Shape{2});
  EXPECT_FALSE(Objective(Spec(MSE), one).keeps_scores());
  EXPECT_FALSE(Objective(Spec(BCE_WITH_LOGITS), two).keeps_scores());
  const Objective mse(Spec(MSE), one);
  const Metrics m = mse.Finish(BinaryEvaluation(mse, {0.3f, -1, 2}, {1, 0, 1}));
  EXPECT_EQ(MetricOr(m, "auc", -1), -1);
  EXPECT_EQ(MetricOr(m, "normalized_entropy", -1), -1);
  // Multi-label BCE: per-element accuracy only.
  const Objective multi(Spec(BCE_WITH_LOGITS), two);
  Batch batch;
  batch.targets.Resize({2, 2});
  Tensor out({2, 2}), scratch;
  for (int i = 0; i < 4; ++i) batch.targets[i] = i % 2, out[i] = i - 1.5f;
  EvalSums sums;
  multi.Accumulate(out, batch, &scratch, &sums);
  EXPECT_TRUE(sums.positive_scores.empty() && sums.negative_scores.empty());
  const Metrics mm = multi.Finish(sums);
  EXPECT_EQ(MetricOr(mm, "auc", -1), -1);
  EXPECT_GE(MetricOr(mm, "accuracy", -1), 0);
}

}  // namespace
}  // namespace cohort
