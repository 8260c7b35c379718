#include "worker/objective.h"

#include <cmath>
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
  int64_t size() const override { return 4; }
  const Shape& sample_shape() const override { return shape_; }
  const Shape& target_shape() const override { return target_; }
  int num_classes() const override { return target_.empty() ? 7 : 0; }
  absl::Status Read(int64_t index, uint64_t, SampleOut& out) const override {
    out.features[0] = index;
    if (target_.empty()) {
      out.label = index % 3;
    } else {
      out.target[0] = 100 + index;
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

}  // namespace
}  // namespace cohort
