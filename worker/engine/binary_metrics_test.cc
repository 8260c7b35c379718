// AUC and normalized entropy through the CPU engine and the training loop:
// reported for BCE_WITH_LOGITS on one target and for nothing else, the same
// AUC to the last bit however an evaluation is split over replicas and
// workers, and usable as eval.metric.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "worker/comm/test_ranks.h"
#include "worker/engine/cpu_engine.h"
#include "worker/metrics/roc_auc.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

// Sample i: three features in {0, 1, 2, 3} and a 0/1 label that leans on
// x0 + x1 / 2 - x2 (noisy, so no model is perfect). Small integers keep
// the logits of the weights below exact in float in any summation order.
struct Sample {
  float x[3];
  float label;
};

std::vector<Sample> MakeSamples(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(0, 3);
  std::normal_distribution<float> noise(0, 1);
  std::vector<Sample> samples(n);
  for (Sample& s : samples) {
    for (float& x : s.x) x = static_cast<float>(level(rng));
    s.label = s.x[0] + 0.5f * s.x[1] - s.x[2] - 0.75f + noise(rng) > 0;
  }
  return samples;
}

std::string WriteCsv(const std::string& path,
                     const std::vector<Sample>& samples) {
  std::ofstream f(path);
  f << "x0,x1,x2,label\n";
  for (const Sample& s : samples) {
    f << s.x[0] << "," << s.x[1] << "," << s.x[2] << "," << s.label << "\n";
  }
  return path;
}

// The weights the engine tests set: logit = x0 + x1 / 2 - x2 + 1/4.
constexpr float kWeights[] = {1, 0.5f, -1};
constexpr float kBias = 0.25f;

double ExpectedAuc(const std::vector<Sample>& samples) {
  std::vector<float> logits, labels;
  for (const Sample& s : samples) {
    logits.push_back(s.x[0] * kWeights[0] + s.x[1] * kWeights[1] +
                     s.x[2] * kWeights[2] + kBias);
    labels.push_back(s.label);
  }
  return RocAuc(logits, labels).value_or(-1);
}

class BinaryMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/binary_metrics_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    test_ = MakeSamples(96, 2);
    WriteCsv(dir_ + "/train.csv", MakeSamples(512, 1));
    WriteCsv(dir_ + "/test.csv", test_);
  }

  // A linear model over the CSV files; `eval` adds fields to its eval
  // block.
  JobSpec Spec(const std::string& loss, const std::string& eval = "",
               double lr = 0.5) {
    const std::string text = absl::StrCat(
        "name: \"ctr\"\nmodel { layers { linear { out_features: 1 } } }\n",
        "data { kind: CSV dir: \"", dir_,
        "\" csv { train: \"train.csv\" test: \"test.csv\" target: \"label\" "
        "features: 3 regression: true } }\n",
        "loss: ", loss, "\nbatch_size: 16\nepochs: 2\nseed: 5\n",
        "optimizer { lr: ", lr, " }\neval { batch_size: 8 ", eval, " }\n");
    absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "ctr.textproto");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.value_or(JobSpec());
  }

  std::string dir_;
  std::vector<Sample> test_;
};

// An engine of `replicas` CPU replicas holding kWeights and kBias.
absl::StatusOr<std::unique_ptr<DeviceEngine>> EngineWithWeights(
    const JobSpec& spec, const DataSplits& data, int replicas,
    const DistributedContext* dist) {
  TrainOptions o;
  o.replicas = replicas;
  o.threads = replicas;
  o.distributed = dist;
  absl::StatusOr<std::unique_ptr<DeviceEngine>> engine =
      CreateCpuEngine(spec, o, data);
  if (!engine.ok()) return engine;
  // Weight {1, 3} then bias {1}, each padded (ParamSizes).
  const std::vector<int64_t> sizes = (*engine)->ParamSizes();
  int64_t total = 0;
  for (const auto& [name, n] : (*engine)->StateLayout()) total += n;
  std::vector<float> flat(total, 0.0f);
  std::copy(std::begin(kWeights), std::end(kWeights), flat.begin());
  flat[sizes[0]] = kBias;
  absl::Status s = (*engine)->RestoreState(flat);
  if (!s.ok()) return s;
  return engine;
}

absl::StatusOr<Metrics> EvaluateLocally(const JobSpec& spec,
                                        const DataSplits& data, int replicas) {
  absl::StatusOr<std::unique_ptr<DeviceEngine>> engine =
      EngineWithWeights(spec, data, replicas, nullptr);
  if (!engine.ok()) return engine.status();
  absl::StatusOr<EvalSums> sums = (*engine)->Evaluate(*data.test, false);
  if (!sums.ok()) return sums.status();
  return Objective(spec, *data.test).Finish(*sums);
}

TEST_F(BinaryMetrics, EngineGivesTheExactAucForAnyReplicaCount) {
  const JobSpec spec = Spec("BCE_WITH_LOGITS");
  absl::StatusOr<DataSplits> data = LoadDataset(spec.data(), "", spec.seed());
  ASSERT_TRUE(data.ok()) << data.status();
  const double want = ExpectedAuc(test_);
  ASSERT_GT(want, 0.7);
  ASSERT_LT(want, 1.0);
  absl::StatusOr<Metrics> one = EvaluateLocally(spec, *data, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(MetricOr(*one, "auc", -1), want);
  const double ne = MetricOr(*one, "normalized_entropy", -1);
  EXPECT_GT(ne, 0);
  EXPECT_LT(ne, 1);  // better than the base rate
  for (int replicas : {2, 3}) {
    absl::StatusOr<Metrics> many = EvaluateLocally(spec, *data, replicas);
    ASSERT_TRUE(many.ok()) << many.status();
    EXPECT_EQ(MetricOr(*many, "auc", -1), want) << replicas << " replicas";
    EXPECT_NEAR(MetricOr(*many, "normalized_entropy", -1), ne, 1e-6)
        << replicas << " replicas";
  }
}

// Two workers of two replicas each, as threads over Gloo: every worker
// gathers every score and computes the same AUC as one replica alone.
TEST_F(BinaryMetrics, WorkersGatherEveryScore) {
  const JobSpec spec = Spec("BCE_WITH_LOGITS");
  constexpr int kWorkers = 2, kReplicas = 2;
  auto group = LocalGroup::Connect(kWorkers, GlooOptions());
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<Metrics> metrics(kWorkers);
  std::vector<std::string> errors(kWorkers);
  (*group)->Run([&](int rank) {
    DistributedContext d;
    d.rank = rank;
    d.world_size = kWorkers;
    d.replica_offset = rank * kReplicas;
    d.total_replicas = kWorkers * kReplicas;
    d.comm = &(*group)->comm(rank);
    absl::StatusOr<DataSplits> data = LoadDataset(spec.data(), "", spec.seed());
    absl::StatusOr<std::unique_ptr<DeviceEngine>> engine =
        data.ok()
            ? EngineWithWeights(spec, *data, kReplicas, &d)
            : absl::StatusOr<std::unique_ptr<DeviceEngine>>(data.status());
    absl::StatusOr<EvalSums> sums =
        engine.ok() ? (*engine)->Evaluate(*data->test, true)
                    : absl::StatusOr<EvalSums>(engine.status());
    if (!sums.ok()) {
      errors[rank] = sums.status().ToString();
      return;
    }
    EXPECT_EQ(sums->positive_scores.size() + sums->negative_scores.size(),
              test_.size());
    metrics[rank] = Objective(spec, *data->test).Finish(*sums);
  });
  const double want = ExpectedAuc(test_);
  for (int rank = 0; rank < kWorkers; ++rank) {
    ASSERT_EQ(errors[rank], "") << "worker " << rank;
    EXPECT_EQ(MetricOr(metrics[rank], "auc", -1), want) << "worker " << rank;
    EXPECT_GT(MetricOr(metrics[rank], "normalized_entropy", -1), 0);
  }
}

TEST_F(BinaryMetrics, TrainingReportsThemForBceOnOneTargetOnly) {
  TrainOptions o;
  o.quiet = true;
  o.replicas = 2;
  o.threads = 2;
  absl::StatusOr<TrainResult> bce = Train(Spec("BCE_WITH_LOGITS"), o);
  ASSERT_TRUE(bce.ok()) << bce.status();
  EXPECT_GT(MetricOr(bce->test_metrics, "auc", -1), 0.7);
  const double ne = MetricOr(bce->test_metrics, "normalized_entropy", -1);
  EXPECT_GT(ne, 0);
  EXPECT_LT(ne, 1);
  ASSERT_EQ(bce->epoch_results.size(), 2u);
  EXPECT_GT(MetricOr(bce->epoch_results[0].test_metrics, "auc", -1), 0);
  absl::StatusOr<TrainResult> mse = Train(Spec("MSE", "", 0.05), o);
  ASSERT_TRUE(mse.ok()) << mse.status();
  EXPECT_EQ(MetricOr(mse->test_metrics, "auc", -1), -1);
  EXPECT_EQ(MetricOr(mse->test_metrics, "normalized_entropy", -1), -1);
  EXPECT_GT(MetricOr(mse->test_metrics, "r2", -1), 0);
}

TEST_F(BinaryMetrics, DriveEarlyStoppingAndTheBestEvaluation) {
  TrainOptions o;
  o.quiet = true;
  for (const char* metric : {"auc", "normalized_entropy"}) {
    absl::StatusOr<TrainResult> r = Train(
        Spec("BCE_WITH_LOGITS",
             absl::StrCat("metric: \"", metric,
                          "\" every_steps: 8 early_stopping_patience: 50")),
        o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->best_metric_name, metric);
    ASSERT_GE(r->best_step, 0) << metric;
    // The best of every evaluation, in the metric's direction.
    const bool higher = std::string(metric) == "auc";
    double best = higher ? -1 : 1e9;
    for (const EpochResult& e : r->epoch_results) {
      const double v = MetricOr(e.test_metrics, metric, best);
      best = higher ? std::max(best, v) : std::min(best, v);
    }
    EXPECT_TRUE(higher ? r->best_metric >= best : r->best_metric <= best)
        << metric << " best " << r->best_metric << " vs epochs' " << best;
  }
}

// Test labels of one class leave both metrics undefined: they are left
// out, and control by them sees no improvement rather than failing.
TEST_F(BinaryMetrics, TestLabelsOfOneClassLeaveThemOut) {
  std::vector<Sample> negatives = test_;
  for (Sample& s : negatives) s.label = 0;
  WriteCsv(dir_ + "/test.csv", negatives);
  TrainOptions o;
  o.quiet = true;
  absl::StatusOr<TrainResult> r = Train(
      Spec("BCE_WITH_LOGITS", "metric: \"auc\" early_stopping_patience: 5"), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(MetricOr(r->test_metrics, "auc", -1), -1);
  EXPECT_EQ(MetricOr(r->test_metrics, "normalized_entropy", -1), -1);
  EXPECT_GE(MetricOr(r->test_metrics, "loss", -1), 0);
  EXPECT_EQ(r->best_step, -1);
}

}  // namespace
}  // namespace cohort
