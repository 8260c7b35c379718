// Every loss trains on one GPU as it does on the CPU engine (the
// reference): a small regression (MSE, L1, Huber) and a multi-label BCE job
// on float targets from NUMPY files, and class data under MSE and under
// cross-entropy with label smoothing. Same data order and initialisation on
// both devices, so only float rounding separates the runs: the losses, the
// test metrics and the parameters must agree closely. Runs where a CUDA
// device exists; skips with the reason elsewhere (CI).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "kernels/cuda/require_gpus.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

float Feature(int64_t i, int j) {
  return static_cast<float>(((i * 31 + j * 7) % 23) - 11) / 8.0f;
}

void WriteNpy(const std::string& path, const std::string& shape,
              const std::vector<float>& data) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(static_cast<char>(dict.size() & 0xff));
  f.put(static_cast<char>(dict.size() >> 8));
  f << dict;
  f.write(reinterpret_cast<const char*>(data.data()),
          data.size() * sizeof(float));
}

// A NUMPY data set of 512 training and 64 test samples of 20 features and
// `targets` (at most 10) float targets, a smooth function of the features
// (or, with `binary`, 0/1 labels of a multi-label task; with one target a
// click-through-rate task, noisy as those are: every fifth label flipped);
// returns the job's data block.
std::string RegressionData(const std::string& name, bool binary,
                           int targets = 10) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [split, first, n] :
       {std::tuple<const char*, int64_t, int64_t>{"train", 0, 512},
        {"test", 512, 64}}) {
    std::vector<float> x, y;
    for (int64_t i = first; i < first + n; ++i) {
      for (int j = 0; j < 20; ++j) x.push_back(Feature(i, j));
      for (int j = 0; j < targets; ++j) {
        const float v = 0.5f * Feature(i, j + 10) + 0.25f * Feature(i, j);
        const bool flip = targets == 1 && i % 5 == 0;
        y.push_back(binary ? ((v > 0) != flip ? 1.0f : 0.0f) : v);
      }
    }
    WriteNpy(absl::StrCat(dir, "/", split, "_x.npy"),
             absl::StrCat("(", n, ", 20)"), x);
    WriteNpy(absl::StrCat(dir, "/", split, "_y.npy"),
             absl::StrCat("(", n, ", ", targets, ")"), y);
  }
  return absl::StrCat("data { kind: NUMPY dir: \"", dir,
                      "\" numpy { shape: 20 target_shape: ", targets,
                      " train_x: \"train_x.npy\" train_y: \"train_y.npy\" "
                      "test_x: \"test_x.npy\" test_y: \"test_y.npy\" } }\n");
}

// A NUMPY data set of inputs [2, 32] and float targets of the same shape
// (a fixed local mixing of the channels): targets of rank 2, which the GPU
// engine lays out {N, 2, 32} as its convolutions' outputs are.
std::string ShapedData(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [split, first, n] :
       {std::tuple<const char*, int64_t, int64_t>{"train", 0, 512},
        {"test", 512, 64}}) {
    std::vector<float> x, y;
    for (int64_t i = first; i < first + n; ++i) {
      for (int j = 0; j < 64; ++j) x.push_back(Feature(i, j));
      for (int c = 0; c < 2; ++c) {
        for (int t = 0; t < 32; ++t) {
          const float next = t + 1 < 32 ? Feature(i, (1 - c) * 32 + t + 1) : 0;
          y.push_back(0.5f * Feature(i, c * 32 + t) + 0.25f * next);
        }
      }
    }
    WriteNpy(absl::StrCat(dir, "/", split, "_x.npy"),
             absl::StrCat("(", n, ", 2, 32)"), x);
    WriteNpy(absl::StrCat(dir, "/", split, "_y.npy"),
             absl::StrCat("(", n, ", 2, 32)"), y);
  }
  return absl::StrCat("data { kind: NUMPY dir: \"", dir,
                      "\" numpy { shape: [2, 32] target_shape: [2, 32] "
                      "train_x: \"train_x.npy\" train_y: \"train_y.npy\" "
                      "test_x: \"test_x.npy\" test_y: \"test_y.npy\" } }\n");
}

constexpr char kClassData[] =
    "data { kind: SYNTHETIC synthetic { shape: 20 classes: 10 "
    "train_samples: 512 test_samples: 128 } }\n";

JobSpec Spec(const std::string& data, const std::string& loss,
             int outputs = 10) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat("model { layers { linear { out_features: 32 } }\n"
                   "        layers { relu {} }\n"
                   "        layers { linear { out_features: ",
                   outputs, " } } }\n", data, loss,
                   "\nbatch_size: 16\nepochs: 2\n"
                   "optimizer { kind: SGD lr: 0.05 momentum: 0.9 }\n"
                   "seed: 5\n"),
      "losses.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

struct Outcome {
  absl::Status status;
  TrainResult result;
  std::vector<float> parameters;
};

// On `gpus`, or with none on `cpu_replicas` CPU replicas.
Outcome TrainOn(const JobSpec& spec, std::vector<int> gpus,
                int cpu_replicas = 1) {
  Outcome run;
  TrainOptions o;
  o.quiet = true;
  o.gpus = std::move(gpus);
  o.replicas = o.threads = cpu_replicas;
  o.final_parameters = &run.parameters;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  run.status = r.status();
  if (r.ok()) run.result = *r;
  return run;
}

// max |a - b| / max |b|.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

double Metric(const TrainResult& r, const std::string& name) {
  for (const auto& [key, value] : r.test_metrics) {
    if (key == name) return value;
  }
  ADD_FAILURE() << "no test metric " << name;
  return NAN;
}

// Trains `spec` on the CPU and on GPU 0; the GPU run must reach the CPU's
// training loss, test loss and metrics (within `tol` relative) with
// parameters within `param_tol` relative. 64 steps of float rounding apart
// (the GPU orders its sums differently) stay well inside these bounds; a
// wrong gradient or loss does not. An accuracy may differ by a sample (or
// an element) whose top two logits (or whose logit and 0) are within
// rounding of each other: 0.01 absolute is one of 128 test samples.
// With several `gpus` the reference is as many CPU replicas (the same
// global batch and data order).
void ExpectGpuFollowsCpu(const JobSpec& spec,
                         const std::vector<std::string>& metrics,
                         double tol = 2e-3, double param_tol = 5e-3,
                         const std::vector<int>& gpus = {0}) {
  const int replicas = static_cast<int>(gpus.size());
  const Outcome cpu = TrainOn(spec, {}, replicas);
  const Outcome gpu = TrainOn(spec, gpus);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  ASSERT_TRUE(gpu.status.ok()) << gpu.status;
  EXPECT_EQ(gpu.result.steps, cpu.result.steps);
  EXPECT_EQ(gpu.result.steps, 64 / replicas);  // 2 epochs of 512 / 16
  EXPECT_NEAR(gpu.result.final_loss, cpu.result.final_loss,
              tol * std::abs(cpu.result.final_loss));
  EXPECT_NEAR(gpu.result.test_loss, cpu.result.test_loss,
              tol * std::abs(cpu.result.test_loss));
  for (const std::string& m : metrics) {
    const double want = Metric(cpu.result, m);
    const double slack = m.find("accuracy") != std::string::npos ? 0.01 : 0;
    EXPECT_NEAR(Metric(gpu.result, m), want,
                tol * std::abs(want) + slack + 1e-6)
        << m;
  }
  // Every epoch's training loss, and the training accuracy that class data
  // counts under any loss (0 on both for float targets).
  ASSERT_EQ(gpu.result.epoch_results.size(), cpu.result.epoch_results.size());
  for (size_t e = 0; e < cpu.result.epoch_results.size(); ++e) {
    const EpochResult& want = cpu.result.epoch_results[e];
    const EpochResult& got = gpu.result.epoch_results[e];
    EXPECT_NEAR(got.train_loss, want.train_loss,
                tol * std::abs(want.train_loss))
        << "epoch " << e;
    EXPECT_NEAR(got.train_accuracy, want.train_accuracy, 0.01) << "epoch " << e;
  }
  ASSERT_EQ(gpu.parameters.size(), cpu.parameters.size());
  ASSERT_FALSE(gpu.parameters.empty());
  EXPECT_LT(RelativeError(gpu.parameters, cpu.parameters), param_tol);
}

TEST(GpuLosses, MseRegressionFollowsTheCpu) {
  REQUIRE_GPU();
  const JobSpec spec = Spec(RegressionData("mse", false), "loss: MSE");
  ExpectGpuFollowsCpu(spec, {"mse", "mae", "r2"});
  // The task is learnable: the comparison is not between two failures.
  const Outcome gpu = TrainOn(spec, {0});
  EXPECT_GT(Metric(gpu.result, "r2"), 0.5);
}

// L1's gradient is a sign: an output that lands on the other side of its
// target by a rounding flips one entry, so the parameters get a looser
// bound than the smooth losses.
TEST(GpuLosses, L1RegressionFollowsTheCpu) {
  REQUIRE_GPU();
  ExpectGpuFollowsCpu(Spec(RegressionData("l1", false), "loss: L1"),
                      {"mse", "mae", "r2"}, 1e-2, 2e-2);
}

TEST(GpuLosses, HuberRegressionFollowsTheCpu) {
  REQUIRE_GPU();
  ExpectGpuFollowsCpu(
      Spec(RegressionData("huber", false), "loss: HUBER huber_delta: 0.5"),
      {"mse", "mae", "r2"});
}

TEST(GpuLosses, ConvRegressionOnShapedTargetsFollowsTheCpu) {
  REQUIRE_GPU();
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat(
          "model { layers { conv1d { out_channels: 8 kernel: 3 padding: 1 } }\n"
          "        layers { relu {} }\n"
          "        layers { conv1d { out_channels: 2 kernel: 3 padding: 1 } } "
          "}\n",
          ShapedData("shaped"),
          "loss: HUBER\nbatch_size: 16\nepochs: 2\n"
          "optimizer { kind: SGD lr: 0.05 momentum: 0.9 }\nseed: 5\n"),
      "shaped.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ExpectGpuFollowsCpu(*spec, {"mse", "mae", "r2"});
}

// Two GPUs all-reduce the gradients of float targets with NCCL and add up
// the evaluation's error sums over both: as two CPU replicas do.
TEST(GpuLosses, TwoGpusRegressionFollowsTwoCpuReplicas) {
  REQUIRE_GPUS(2);
  ExpectGpuFollowsCpu(Spec(RegressionData("two_gpus", false), "loss: MSE"),
                      {"mse", "mae", "r2"}, 2e-3, 5e-3, {0, 1});
}

TEST(GpuLosses, MultiLabelBceFollowsTheCpu) {
  REQUIRE_GPU();
  ExpectGpuFollowsCpu(
      Spec(RegressionData("bce", true), "loss: BCE_WITH_LOGITS"), {"accuracy"});
}

// One logit per sample: normalized entropy as the test loss, and an AUC
// (every score, sorted) that moves by 1/(P N) = 1/1024 per pair of test
// scores rounding swaps, so within a few of those.
void ExpectClickThroughRateFollowsCpu(const std::string& name,
                                      const std::vector<int>& gpus) {
  const JobSpec spec =
      Spec(RegressionData(name, true, 1), "loss: BCE_WITH_LOGITS", 1);
  ExpectGpuFollowsCpu(spec, {"accuracy", "normalized_entropy"}, 2e-3, 5e-3,
                      gpus);
  const Outcome cpu = TrainOn(spec, {}, static_cast<int>(gpus.size()));
  const Outcome gpu = TrainOn(spec, gpus);
  ASSERT_TRUE(cpu.status.ok() && gpu.status.ok()) << gpu.status;
  EXPECT_GT(Metric(cpu.result, "auc"), 0.6);
  EXPECT_NEAR(Metric(gpu.result, "auc"), Metric(cpu.result, "auc"), 4.0 / 1024);
}

TEST(GpuLosses, ClickThroughRateMetricsFollowTheCpu) {
  REQUIRE_GPU();
  ExpectClickThroughRateFollowsCpu("ctr", {0});
}

// Two GPUs' scores are put together before the AUC is computed.
TEST(GpuLosses, TwoGpusClickThroughRateMetricsFollowTwoCpuReplicas) {
  REQUIRE_GPUS(2);
  ExpectClickThroughRateFollowsCpu("ctr_two_gpus", {0, 1});
}

TEST(GpuLosses, MseOnClassLabelsFollowsTheCpu) {
  REQUIRE_GPU();
  const JobSpec spec = Spec(kClassData, "loss: MSE");
  ExpectGpuFollowsCpu(spec, {"accuracy", "top5_accuracy"});
  // Top-1 hits are counted in training too, not left at 0.
  const Outcome gpu = TrainOn(spec, {0});
  ASSERT_FALSE(gpu.result.epoch_results.empty());
  EXPECT_GT(gpu.result.epoch_results.back().train_accuracy, 0.3);
}

TEST(GpuLosses, LabelSmoothingFollowsTheCpu) {
  REQUIRE_GPU();
  ExpectGpuFollowsCpu(
      Spec(kClassData, "loss: CROSS_ENTROPY label_smoothing: 0.1"),
      {"accuracy", "top5_accuracy"});
}

// A model whose output does not fit the targets is refused at setup with
// the CPU engine's words (Objective::CheckModelOutput), not trained.
TEST(GpuLosses, OutputThatDoesNotFitTheTargetsIsRefused) {
  REQUIRE_GPU();
  const JobSpec spec = Spec(RegressionData("shape", false), "loss: MSE", 7);
  const Outcome cpu = TrainOn(spec, {});
  const Outcome gpu = TrainOn(spec, {0});
  EXPECT_EQ(gpu.status.code(), absl::StatusCode::kInvalidArgument)
      << gpu.status;
  EXPECT_EQ(gpu.status.message(), cpu.status.message());
}

}  // namespace
}  // namespace cohort
