// A diverging run (a learning rate of 1e30) produces infinite and then NaN
// gradients: the default policy stops it naming the step, NONFINITE_SKIP
// skips and counts those steps and never lets a NaN into the parameters
// through the optimizer.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

JobSpec Diverging(const std::string& policy) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(absl::StrCat("model { zoo: \"mlp_seed\" }\n"
                                "data { kind: SYNTHETIC synthetic { shape: 100 "
                                "train_samples: 256 test_samples: 32 } }\n"
                                "batch_size: 16\nmax_steps: 40\n"
                                "optimizer { kind: SGD lr: 1e30 }\n",
                                policy),
                   "diverging.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TrainOptions Options(std::vector<float>* params) {
  TrainOptions o;
  o.quiet = true;
  o.replicas = 2;
  o.threads = 2;
  o.final_parameters = params;
  return o;
}

TEST(NonFiniteGradients, DefaultFailsNamingTheStep) {
  std::vector<float> params;
  absl::StatusOr<TrainResult> r = Train(Diverging(""), Options(&params));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
      << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("NaN or infinite"));
  EXPECT_THAT(r.status().message(), HasSubstr("step "));
}

TEST(NonFiniteGradients, SkipCountsTheStepsAndTrainsOn) {
  std::vector<float> params;
  absl::StatusOr<TrainResult> r = Train(
      Diverging("nonfinite_gradients: NONFINITE_SKIP\n"), Options(&params));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 40);
  EXPECT_GT(r->skipped_steps, 0);
  EXPECT_LT(r->skipped_steps, 40);
  for (float p : params) ASSERT_FALSE(std::isnan(p));
  EXPECT_THAT(ReportJson(*r), HasSubstr("\"skipped_steps\": "));
}

}  // namespace
}  // namespace cohort
