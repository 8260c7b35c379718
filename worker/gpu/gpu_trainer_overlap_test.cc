// The GPU trainer end to end on a synthetic data set: its trajectory
// against the CPU engine's (the reference), and the bucketed all-reduce
// and double-buffered input against the plain path. Runs where CUDA
// devices exist; skips with the reason elsewhere.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "client/kv_client.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/require_gpus.h"
#include "worker/gpu/gpu_engine.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

constexpr char kSyntheticMlp[] = R"(
  name: "synthetic-mlp"
  model { zoo: "mlp_seed" }
  data { kind: SYNTHETIC synthetic { shape: 100 classes: 10 train_samples: 2048
         test_samples: 512 noise: 1.0 } }
  batch_size: 16
  epochs: 1
  optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
  seed: 7
)";

JobSpec Spec() {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kSyntheticMlp, "test.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

// Largest |a - b| over the largest |b|.
double RelativeDifference(const std::vector<float>& a,
                          const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(1.0 * a[i] - b[i]));
    scale = std::max(scale, std::abs(1.0 * b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Outcome {
  TrainResult result;
  std::vector<float> params;
};

Outcome TrainOn(const JobSpec& spec, std::vector<int> gpus, int64_t max_steps,
                const DistributedContext* dist = nullptr) {
  Outcome run;
  TrainOptions o;
  o.quiet = true;
  o.max_steps = max_steps;
  o.gpus = std::move(gpus);
  o.final_parameters = &run.params;
  o.distributed = dist;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) run.result = *r;
  return run;
}

// Several steps, and more than one epoch, so that prefetching across the
// epoch boundary and evaluation between epochs are exercised.
TEST(GpuTrainer, OneGpuFollowsTheCpuEngine) {
  REQUIRE_GPUS(1);
  JobSpec spec = Spec();
  spec.set_epochs(2);
  const int64_t steps = 2048 / 16 + 5;  // into the second epoch
  const Outcome gpu = TrainOn(spec, {0}, steps);
  const Outcome cpu = TrainOn(spec, {}, steps);
  ASSERT_EQ(gpu.params.size(), cpu.params.size());
  EXPECT_EQ(gpu.result.steps, steps);
  EXPECT_EQ(gpu.result.samples, cpu.result.samples);
  // Different summation orders (cuBLAS against the CPU's GEMM), amplified
  // a little by training.
  EXPECT_LT(RelativeDifference(gpu.params, cpu.params), 1e-4);
  ASSERT_EQ(gpu.result.epoch_results.size(), cpu.result.epoch_results.size());
  for (size_t e = 0; e < cpu.result.epoch_results.size(); ++e) {
    const EpochResult& g = gpu.result.epoch_results[e];
    const EpochResult& c = cpu.result.epoch_results[e];
    EXPECT_NEAR(g.train_loss, c.train_loss, 1e-4 * std::abs(c.train_loss))
        << "epoch " << e;
    EXPECT_NEAR(g.train_accuracy, c.train_accuracy, 1e-3) << "epoch " << e;
  }
  EXPECT_NEAR(gpu.result.test_accuracy, cpu.result.test_accuracy, 1e-2);
  EXPECT_GT(gpu.result.test_accuracy, 0.5);
}

// One GPU in a one-GPU "job": the NCCL path (comm stream, per-bucket
// events, tiny buckets so that there are many) must give the same
// parameters, bit for bit, as the plain single-GPU path: a one-rank sum
// changes nothing, so any difference is a bucket reduced too early or
// missed.
TEST(GpuTrainer, BucketedAllReduceLeavesOneGpuUnchanged) {
  REQUIRE_GPUS(1);
  JobSpec spec = Spec();
  const int64_t steps = 20;
  const Outcome plain = TrainOn(spec, {0}, steps);

  InMemoryKv kv;
  GpuWorkerPlacement placement;
  placement.gpus = {0};
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> nccl =
      CreateWorkerNccl(kv, "nccl/", placement, "flat", absl::Seconds(20));
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  DistributedContext dist;
  dist.nccl = nccl->get();
  dist.bucket_bytes = 1024;  // a few layers' worth at most
  dist.epoch_seed = [&](int64_t) -> absl::StatusOr<uint64_t> {
    return spec.seed();
  };
  const Outcome bucketed = TrainOn(spec, {0}, steps, &dist);
  ASSERT_EQ(bucketed.params.size(), plain.params.size());
  EXPECT_EQ(RelativeDifference(bucketed.params, plain.params), 0.0);
  EXPECT_EQ(bucketed.result.final_loss, plain.result.final_loss);
}

// Two GPUs with batch b (bucketed all-reduce, small buckets) follow one
// GPU with batch 2b, and bucket sizes do not change the result.
TEST(GpuTrainer, TwoGpusEqualOneWithTwiceTheBatch) {
  REQUIRE_GPUS(2);
  JobSpec spec = Spec();
  spec.set_batch_size(8);
  spec.mutable_cluster()->set_bucket_bytes(2048);
  const Outcome small_buckets = TrainOn(spec, {0, 1}, 20);
  spec.mutable_cluster()->set_bucket_bytes(64 << 20);
  const Outcome one_bucket = TrainOn(spec, {0, 1}, 20);
  spec.set_batch_size(16);
  const Outcome one = TrainOn(spec, {0}, 20);
  ASSERT_EQ(small_buckets.params.size(), one.params.size());
  // Two ranks: each sum is a + b whatever the bucket, so exactly equal.
  EXPECT_EQ(RelativeDifference(small_buckets.params, one_bucket.params), 0.0);
  EXPECT_LT(RelativeDifference(small_buckets.params, one.params), 1e-4);
}

}  // namespace
}  // namespace cohort
