#include "common/memory_estimate.h"

#include <string>

#include "common/spec.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

JobSpec Spec(const std::string& model, const std::string& extra = "",
             const std::string& shape = "[1, 28, 28]") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "model { " + model + " }\n" + "data { synthetic { shape: " + shape +
          " train_samples: 64 test_samples: 16 } }\n"
          "batch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n" +
          extra,
      "x.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

MemoryEstimate Estimate(const JobSpec& spec, WorkerMemoryOptions o = {}) {
  absl::StatusOr<ModelSizes> sizes = InferJobModelSizes(spec);
  EXPECT_TRUE(sizes.ok()) << sizes.status();
  return EstimateWorkerMemory(spec, sizes.ok() ? *sizes : ModelSizes(), o);
}

const AvailableMemory kMachine{21 * kGiB, "MemAvailable"};

TEST(MemoryEstimate, SmallModelsFitEasily) {
  const MemoryEstimate e = Estimate(Spec("zoo: \"lenet5\""));
  EXPECT_GT(e.total.value(), 61706 * 4 * 2);  // values and gradients at least
  EXPECT_LT(e.total.value(), 64 << 20);
  EXPECT_TRUE(CheckMemoryFits(e, kMachine, "this process").ok());
}

// A linear layer no machine holds: 100M outputs over 784 inputs, 78.5e9
// parameters, values and gradients: arithmetic is fine, the machine is not.
TEST(MemoryEstimate, RefusesAModelLargerThanTheMachineNamingTheLayer) {
  const MemoryEstimate e = Estimate(
      Spec("layers { flatten {} } layers { linear { out_features: 100000000 } "
           "}"));
  EXPECT_FALSE(e.total.overflow());
  EXPECT_GT(e.total.value(), int64_t{78500000000} * 4 * 2);
  EXPECT_TRUE(CheckNoOverflow(e).ok());
  const absl::Status s = CheckMemoryFits(e, kMachine, "this process");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(s.message()).rfind("layer 1 (linear) needs 584.", 0),
            0u)
      << s;
  EXPECT_NE(s.message().find("of parameters (78500000000 parameters"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("this machine has 21.0 GiB available "
                             "(MemAvailable)"),
            std::string::npos)
      << s;
}

TEST(MemoryEstimate, ActivationsOfAHugeConvolutionNameIt) {
  const MemoryEstimate e = Estimate(
      Spec("layers { conv2d { out_channels: 4 kernel: 1 padding: 100000 } } "
           "layers { flatten {} } layers { linear { out_features: 10 } }"));
  EXPECT_EQ(e.Largest().what.rfind("layer 0 (conv2d) needs ", 0), 0u)
      << e.Largest().what;
  EXPECT_NE(e.Largest().what.find("of activations ([4, 200028, 200028] per "
                                  "sample, batches of 32 samples)"),
            std::string::npos)
      << e.Largest().what;
}

TEST(MemoryEstimate, SamplerIndicesOfAHugeSyntheticSet) {
  JobSpec spec = Spec("zoo: \"lenet5\"");
  spec.mutable_data()->mutable_synthetic()->set_train_samples(100000000000);
  const MemoryEstimate e = Estimate(spec);
  // The permutation and this replica's share, 8 bytes an index.
  EXPECT_EQ(e.Largest().bytes.value(), int64_t{100000000000} * 8 * 2);
  EXPECT_EQ(e.Largest().what,
            "data.synthetic.train_samples needs 1.5 TiB for the sampler's "
            "indices (100000000000 samples)");
}

TEST(MemoryEstimate, ReplicasOptimizerAndCheckpointsMultiplyParameters) {
  JobSpec spec = Spec("zoo: \"mlp_seed\"", "", "[100]");
  spec.mutable_optimizer()->set_kind(OptimizerSpec::ADAM);
  WorkerMemoryOptions o;
  o.replicas = 4;
  const MemoryEstimate e = Estimate(spec, o);
  // Layer 0: 100 x 200 + 200 parameters (both tensors multiples of 16
  // after padding: 20000 and 208): values, 4 gradients, 2 moments.
  EXPECT_EQ(e.parts[0].bytes.value(), (20000 + 208) * 4 * 7);
  EXPECT_NE(e.parts[0].what.find("values, gradients x4 replicas, ADAM "
                                 "moments"),
            std::string::npos)
      << e.parts[0].what;
  o.checkpoints = true;
  EXPECT_EQ(Estimate(spec, o).parts[0].bytes.value(), (20000 + 208) * 4 * 10);
  // GPUs: the host keeps one model's values and gradients, no activations.
  o = WorkerMemoryOptions();
  o.gpus = true;
  o.replicas = 8;
  const MemoryEstimate g = Estimate(spec, o);
  EXPECT_EQ(g.parts[0].bytes.value(), (20000 + 208) * 4 * 2);
  for (const MemoryPart& p : g.parts) {
    EXPECT_EQ(p.what.find("activations"), std::string::npos) << p.what;
  }
}

TEST(MemoryEstimate, OverflowIsAnErrorNotAWrap) {
  JobSpec spec = Spec(
      "layers { conv2d { out_channels: 4 kernel: 1 padding: 100000 } } "
      "layers { global_avgpool {} } layers { linear { out_features: 10 } }");
  spec.set_batch_size(2000000000);
  const MemoryEstimate e = Estimate(spec);
  EXPECT_TRUE(e.total.overflow());
  const absl::Status s = CheckNoOverflow(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("layer 0 (conv2d) needs more than 8 EiB of "
                             "activations"),
            std::string::npos)
      << s;
  EXPECT_FALSE(CheckMemoryFits(e, kMachine, "this process").ok());
}

TEST(MemoryEstimate, ShardHoldsItsSliceWithOptimizerState) {
  JobSpec spec = Spec("zoo: \"lenet5\"", "mode: PS\n");
  spec.mutable_optimizer()->set_momentum(0.9f);
  // Values, a push buffer, SYNC's gradient sum and the momentum.
  const MemoryEstimate e = EstimateShardMemory(spec, 1000, 5000);
  EXPECT_EQ(e.total.value(), 1000 * 4 * 4);
  EXPECT_EQ(e.Largest().what,
            "its 1000 of the job's 5000 parameters need 15.6 KiB (values, a "
            "push buffer, the step's gradient sum, momentum)");
  const AvailableMemory tiny{100, "MemAvailable"};
  EXPECT_EQ(CheckMemoryFits(e, tiny, "the shard").message(),
            "its 1000 of the job's 5000 parameters need 15.6 KiB (values, a "
            "push buffer, the step's gradient sum, momentum); the shard needs "
            "15.6 KiB in all and this machine has 100 bytes available "
            "(MemAvailable)");
}

TEST(MemoryEstimate, TimesScalesEveryPart) {
  const MemoryEstimate one = Estimate(Spec("zoo: \"lenet5\""));
  const MemoryEstimate three = Times(one, 3, "workers");
  EXPECT_EQ(three.total.value(), 3 * one.total.value());
  EXPECT_NE(three.parts[0].what.find(" x 3 workers"), std::string::npos);
}

// A model run forward (export, predict, evaluate) holds its values,
// gradients and the checkpoint's copy, but no optimizer state or data set.
TEST(MemoryEstimate, ForwardOnlyCountsNoOptimizerStateOrData) {
  JobSpec spec = Spec("zoo: \"lenet5\"");
  spec.mutable_optimizer()->set_kind(OptimizerSpec::ADAM);
  WorkerMemoryOptions forward;
  forward.forward_only = true;
  forward.checkpoints = true;
  const MemoryEstimate e = Estimate(spec, forward);
  ASSERT_FALSE(e.parts.empty());
  for (const MemoryPart& p : e.parts) {
    EXPECT_EQ(p.what.find("moments"), std::string::npos) << p.what;
    EXPECT_EQ(p.what.find("data"), std::string::npos) << p.what;
    EXPECT_EQ(p.what.find("loader"), std::string::npos) << p.what;
  }
  EXPECT_NE(e.parts[0].what.find("values, gradients, checkpoint copies"),
            std::string::npos)
      << e.parts[0].what;
  EXPECT_LT(e.total.value(), Estimate(spec).total.value());
}

// A loaded model's copies share its parameters: only their own gradients
// and activations count, none for the model itself.
TEST(MemoryEstimate, AnAllocatedModelCountsOnlyTheOtherCopiesGradients) {
  const JobSpec spec = Spec("zoo: \"lenet5\"");
  WorkerMemoryOptions one;
  one.forward_only = true;
  one.model_allocated = true;
  for (const MemoryPart& p : Estimate(spec, one).parts) {
    EXPECT_NE(p.what.find("activations"), std::string::npos) << p.what;
  }
  WorkerMemoryOptions three = one;
  three.replicas = 3;
  const MemoryEstimate e = Estimate(spec, three);
  EXPECT_EQ(e.parts[0].what,
            "layer 0 (conv2d) needs 1.4 KiB of parameters (156 parameters: "
            "gradients x2 more replicas)");
  WorkerMemoryOptions fresh = three;
  fresh.model_allocated = false;
  EXPECT_LT(e.total.value(), Estimate(spec, fresh).total.value());
}

}  // namespace
}  // namespace cohort
