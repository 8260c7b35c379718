// What the shared training loop (worker/training_loop.h) gives the GPU
// engine: checkpoints and exact resume, checkpoints that move between the
// GPU and the CPU engine (the same state layout), and the final checkpoint
// of a stop signal. Runs where a CUDA device exists; skips with the reason
// elsewhere (CI). tools/gpu-check runs it on a GPU machine.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "kernels/cuda/require_gpus.h"
#include "worker/gpu/compare_testing.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

// The CPU engine is the reference: cuDNN's transform-based algorithms
// (Winograd, FFT) round differently from a direct convolution, by enough to
// part two 30-step runs, so these comparisons run without them.
const bool kDirectConvolutions = setenv("COHORT_CUDNN_DIRECT", "1", 1) == 0;

constexpr char kSpec[] = R"(
  name: "gpu-loop-test"
  model { zoo: "lenet_cifar" }
  data { kind: SYNTHETIC synthetic { shape: [3, 32, 32] classes: 10
         train_samples: 2048 test_samples: 256 } }
  batch_size: 64
  epochs: 2
  optimizer { kind: ADAM lr: 0.001 }
  checkpoint { every_steps: 10 keep: 2 }
  seed: 5
)";

JobSpec Spec() {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kSpec, "test.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(dir);  // a rerun in the same folder starts anew
  return dir;
}

// ||a - b|| / ||b|| (compare_testing.h says why L2), printed with the
// max-norm for the run's log.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  std::cout << "parameters: " << gpu_testing::Errors(a, b) << "\n";
  return gpu_testing::L2RelativeError(a, b);
}

struct Outcome {
  absl::StatusOr<TrainResult> result;
  std::vector<float> parameters;
};

Outcome TrainOn(std::vector<int> gpus, const std::string& dir,
                int64_t stop_after, const std::atomic<bool>* stop = nullptr) {
  Outcome run;
  TrainOptions o;
  o.quiet = true;
  o.gpus = std::move(gpus);
  o.checkpoint_dir = dir;
  o.stop_after_steps = stop_after;
  o.stop_signal = stop;
  o.final_parameters = &run.parameters;
  run.result = Train(Spec(), o);
  return run;
}

TEST(GpuLoop, InterruptedAndResumedFollowsTheStraightRun) {
  REQUIRE_GPU();
  const Outcome straight = TrainOn({0}, FreshDir("straight"), 0);
  ASSERT_TRUE(straight.result.ok()) << straight.result.status();
  const std::string dir = FreshDir("resumed");
  const Outcome first = TrainOn({0}, dir, 25);
  EXPECT_EQ(first.result.status().code(), absl::StatusCode::kCancelled);
  const Outcome rest = TrainOn({0}, dir, 0);
  ASSERT_TRUE(rest.result.ok()) << rest.result.status();
  EXPECT_EQ(rest.result->steps, straight.result->steps);
  // The resumed run restarts from step 20's checkpoint; cuDNN may pick
  // other algorithms in a new process, so equal up to float rounding.
  EXPECT_LT(RelativeError(rest.parameters, straight.parameters), 1e-4);
}

TEST(GpuLoop, AGpuCheckpointResumesOnTheCpuAndBack) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("cross");
  const Outcome gpu = TrainOn({0}, dir, 20);
  EXPECT_EQ(gpu.result.status().code(), absl::StatusCode::kCancelled);
  const Outcome cpu = TrainOn({}, dir, 10);  // steps 20..30 on the CPU
  EXPECT_EQ(cpu.result.status().code(), absl::StatusCode::kCancelled);
  const Outcome back = TrainOn({0}, dir, 0);
  ASSERT_TRUE(back.result.ok()) << back.result.status();
  const Outcome straight = TrainOn({}, FreshDir("cross_cpu"), 0);
  ASSERT_TRUE(straight.result.ok()) << straight.result.status();
  EXPECT_EQ(back.result->steps, straight.result->steps);
  EXPECT_LT(RelativeError(back.parameters, straight.parameters), 1e-2);
}

TEST(GpuLoop, AStopSignalWritesAFinalCheckpoint) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("stop");
  std::atomic<bool> stop{true};  // stop after the first step
  const Outcome run = TrainOn({0}, dir, 0, &stop);
  EXPECT_EQ(run.result.status().code(), absl::StatusCode::kCancelled);
  absl::StatusOr<Checkpoint> c = LoadLatestCheckpoint(dir, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 1);
}

// A diverging run fails naming the step (nonfinite_gradients: FAIL, the
// default); skipping such steps is refused on GPUs, in one sentence.
TEST(GpuLoop, ANonFiniteGradientFailsAndSkippingIsRefused) {
  REQUIRE_GPU();
  JobSpec spec = Spec();
  spec.clear_checkpoint();
  spec.mutable_optimizer()->set_kind(OptimizerSpec::SGD);
  spec.mutable_optimizer()->set_lr(1e30);
  TrainOptions o;
  o.quiet = true;
  o.gpus = {0};
  absl::StatusOr<TrainResult> r = Train(spec, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
      << r.status();
  EXPECT_NE(r.status().message().find("NaN or infinite"),
            absl::string_view::npos)
      << r.status();
  spec.set_nonfinite_gradients(NONFINITE_SKIP);
  r = Train(spec, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
}

}  // namespace
}  // namespace cohort
