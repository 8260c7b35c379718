// The GPU trainer end to end on a convolutional model, against the CPU
// trainer (the reference): float32 training on one GPU follows the CPU
// run's parameters, and bf16 mixed precision learns as well as float32
// does. (gpu_trainer_overlap_test covers the bucketed all-reduce and the
// double-buffered input.) Runs where a CUDA device exists; skips with the
// reason elsewhere (CI).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "common/spec.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/require_gpus.h"
#include "worker/gpu/compare_testing.h"
#include "worker/gpu/gpu_engine.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

// The CPU engine is the reference: cuDNN's transform-based algorithms
// (Winograd, FFT) round differently from a direct convolution, by enough to
// part two 30-step runs, so these comparisons run without them.
const bool kDirectConvolutions = setenv("COHORT_CUDNN_DIRECT", "1", 1) == 0;

JobSpec Spec(const std::string& text) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "test.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

constexpr char kLenetCifar[] = R"(
  name: "gpu-trainer-test"
  model { zoo: "lenet_cifar" }
  data { kind: SYNTHETIC synthetic { shape: [3, 32, 32] classes: 10
         train_samples: 4096 test_samples: 1024 noise: 1.0 } }
  batch_size: 64
  epochs: 2
  optimizer { kind: SGD lr: 0.02 momentum: 0.9 }
  seed: 11
)";

struct Outcome {
  TrainResult result;
  std::vector<float> parameters;
};

Outcome TrainOn(const JobSpec& spec, std::vector<int> gpus) {
  Outcome run;
  TrainOptions o;
  o.quiet = true;
  o.gpus = std::move(gpus);
  o.final_parameters = &run.parameters;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) run.result = *r;
  return run;
}

// ||a - b|| / ||b||, printed with the max-norm for the run's log. Training
// runs are compared in L2: rounding moves a ReLU across zero now and then,
// and each such step nudges whole rows (compare_testing.h).
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  std::cout << "parameters: " << gpu_testing::Errors(a, b) << "\n";
  return gpu_testing::L2RelativeError(a, b);
}

TEST(GpuTrainer, Float32ConvNetFollowsTheCpuTrainer) {
  REQUIRE_GPU();
  JobSpec spec = Spec(kLenetCifar);
  spec.set_max_steps(30);
  const Outcome cpu = TrainOn(spec, {});
  const Outcome gpu = TrainOn(spec, {0});
  ASSERT_EQ(cpu.parameters.size(), gpu.parameters.size());
  ASSERT_FALSE(gpu.parameters.empty());
  EXPECT_EQ(gpu.result.steps, 30);
  // Same data order and initialisation; only float rounding differs (the
  // GPU orders its reductions differently), over 30 steps.
  EXPECT_LT(RelativeError(gpu.parameters, cpu.parameters), 1e-3);
}

// Clipping by value and by global norm on the GPU follows the
// CPU engine's clipping (the norm's scale computed on the device), with
// limits that bite on every step: without clipping the runs would part.
TEST(GpuTrainer, ClippedTrainingFollowsTheCpuTrainer) {
  REQUIRE_GPU();
  JobSpec spec = Spec(kLenetCifar);
  spec.set_max_steps(30);
  spec.mutable_optimizer()->set_clip_grad_value(0.02f);
  spec.mutable_optimizer()->set_clip_grad_norm(0.1f);
  const Outcome cpu = TrainOn(spec, {});
  const Outcome gpu = TrainOn(spec, {0});
  ASSERT_EQ(cpu.parameters.size(), gpu.parameters.size());
  ASSERT_FALSE(gpu.parameters.empty());
  EXPECT_LT(RelativeError(gpu.parameters, cpu.parameters), 1e-3);
  spec.mutable_optimizer()->clear_clip_grad_value();
  spec.mutable_optimizer()->clear_clip_grad_norm();
  const Outcome unclipped = TrainOn(spec, {0});
  EXPECT_GT(RelativeError(unclipped.parameters, gpu.parameters), 1e-2);
}

// 4 accumulated batches of 16 on a GPU train as the CPU trainer
// accumulating them does, and as one GPU batch of 64 (the epoch's 4096
// samples divide, so every step is whole).
TEST(GpuTrainer, AccumulationFollowsTheCpuTrainerAndTheLargerBatch) {
  REQUIRE_GPU();
  JobSpec spec = Spec(kLenetCifar);
  spec.set_max_steps(20);
  spec.set_batch_size(16);
  spec.set_gradient_accumulation_steps(4);
  const Outcome cpu = TrainOn(spec, {});
  const Outcome gpu = TrainOn(spec, {0});
  ASSERT_FALSE(gpu.parameters.empty());
  EXPECT_EQ(gpu.result.steps, 20);
  EXPECT_EQ(gpu.result.samples, 20 * 64);
  EXPECT_LT(RelativeError(gpu.parameters, cpu.parameters), 1e-3);
  EXPECT_NEAR(gpu.result.final_loss, cpu.result.final_loss,
              1e-3 * cpu.result.final_loss);
  spec.set_batch_size(64);
  spec.clear_gradient_accumulation_steps();
  const Outcome big = TrainOn(spec, {0});
  EXPECT_LT(RelativeError(gpu.parameters, big.parameters), 1e-3);
}

// RMSprop (with and without momentum and weight decay), LAMB and LARS
// (biases and norms out of weight decay) on the GPU follow the CPU trainer
// too. RMSprop's first steps move every weight by about 10 * lr * sign(g)
// whatever |g| is, so rounding near g = 0 is magnified: at lr 1e-3 two CPU
// runs whose initial weights differ by one ulp part by L2 0.22 over these
// 30 steps, at lr 1e-4 by 8e-4 (RMSprop's bound is looser for that).
TEST(GpuTrainer, NewOptimizersFollowTheCpuTrainer) {
  REQUIRE_GPU();
  const std::pair<const char*, double> cases[] = {
      {"kind: RMSPROP lr: 0.0001", 1e-2},
      {"kind: RMSPROP lr: 0.0001 momentum: 0.5", 1e-2},
      {"kind: RMSPROP lr: 0.0001 momentum: 0.5 weight_decay: 0.01 "
       "no_decay_bias_and_norm: true",
       1e-2},
      {"kind: LAMB lr: 0.01 weight_decay: 0.01 no_decay_bias_and_norm: true",
       1e-3},
      {"kind: LARS lr: 0.5 momentum: 0.9 weight_decay: 0.0005 "
       "no_decay_bias_and_norm: true",
       1e-3},
  };
  for (const auto& [optimizer, bound] : cases) {
    std::cout << optimizer << "\n";
    std::string text = kLenetCifar;
    const std::string sgd = "kind: SGD lr: 0.02 momentum: 0.9";
    text.replace(text.find(sgd), sgd.size(), optimizer);
    JobSpec spec = Spec(text);
    spec.set_max_steps(30);
    const Outcome cpu = TrainOn(spec, {});
    const Outcome gpu = TrainOn(spec, {0});
    ASSERT_EQ(cpu.parameters.size(), gpu.parameters.size()) << optimizer;
    ASSERT_FALSE(gpu.parameters.empty()) << optimizer;
    EXPECT_LT(RelativeError(gpu.parameters, cpu.parameters), bound)
        << optimizer;
  }
}

TEST(GpuTrainer, Bf16LearnsAsWellAsFloat32) {
  REQUIRE_GPU();
  JobSpec spec = Spec(kLenetCifar);
  const Outcome fp32 = TrainOn(spec, {0});
  spec.set_precision(BF16);
  const Outcome bf16 = TrainOn(spec, {0});
  ASSERT_EQ(fp32.result.epochs, 2);
  ASSERT_EQ(bf16.result.epochs, 2);
  // The synthetic set is learnable: float32 gets well above chance (10%).
  EXPECT_GT(fp32.result.test_accuracy, 0.5);
  EXPECT_GE(bf16.result.test_accuracy, fp32.result.test_accuracy - 0.02)
      << "float32 " << fp32.result.test_accuracy;
  // Different rounding, so not the same parameters, but close.
  EXPECT_LT(RelativeError(bf16.parameters, fp32.parameters), 0.1);
}

}  // namespace
}  // namespace cohort
