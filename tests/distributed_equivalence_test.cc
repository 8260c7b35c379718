// W workers x R replicas x per-replica batch b must end with the same
// parameters as 1 worker x 1 replica with batch W*R*b after K steps: the
// samplers interleave one permutation, gradients are bucketed, reduced
// locally, all-reduced across workers with Gloo during backward, and every
// replica applies the same optimizer step. Workers are threads here, each
// with its own trainer and a real Gloo communicator over loopback TCP,
// rendezvousing through an in-memory KV store.
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/kv_client.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_store.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

JobSpec Spec(const std::string& model, int batch) {
  std::string shape = model == "mlp_seed" ? "100" : "[3, 32, 32]";
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec("model { zoo: \"" + model +
                       "\" }\n"
                       "data { kind: SYNTHETIC synthetic { shape: " +
                       shape +
                       " train_samples: 512 test_samples: 64 } }\n"
                       "batch_size: " +
                       std::to_string(batch) +
                       "\nepochs: 1\n"
                       "optimizer { kind: SGD lr: 0.05 momentum: 0.9 }\n"
                       "seed: 11\n",
                   "equivalence.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::vector<float> TrainOne(const JobSpec& spec, int steps) {
  TrainOptions o;
  o.quiet = true;
  o.max_steps = steps;
  std::vector<float> params;
  o.final_parameters = &params;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return params;
}

// Runs `workers` trainers as threads, each with `replicas` local replicas
// and a share of one Gloo job; returns each worker's final parameters.
std::vector<std::vector<float>> TrainWorkers(const JobSpec& spec, int workers,
                                             int replicas, int steps,
                                             int64_t bucket_bytes) {
  InMemoryKv kv;
  std::vector<std::vector<float>> params(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      KvGlooStore store(&kv, "eq/", absl::Seconds(20));
      GlooOptions g;
      g.timeout = absl::Seconds(20);
      auto comm = CreateGlooCommunicator(store, w, workers, g);
      ASSERT_TRUE(comm.ok()) << comm.status();
      DistributedContext d;
      d.rank = w;
      d.world_size = workers;
      d.replica_offset = w * replicas;
      d.total_replicas = workers * replicas;
      d.comm = comm->get();
      d.bucket_bytes = bucket_bytes;
      d.epoch_seed = [&spec](int64_t) -> absl::StatusOr<uint64_t> {
        return spec.seed();
      };
      TrainOptions o;
      o.quiet = true;
      o.max_steps = steps;
      o.replicas = replicas;
      o.threads = replicas;
      o.distributed = &d;
      o.final_parameters = &params[w];
      absl::StatusOr<TrainResult> r = Train(spec, o);
      ASSERT_TRUE(r.ok()) << r.status();
    });
  }
  for (auto& t : threads) t.join();
  return params;
}

// max |a - b| relative to the parameters' largest magnitude.
double RelativeDifference(const std::vector<float>& a,
                          const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(1.0 * a[i] - b[i]));
    scale = std::max(scale, std::abs(1.0 * b[i]));
  }
  return diff / scale;
}

void ExpectEquivalent(const std::string& model, int workers, int replicas,
                      int64_t bucket_bytes) {
  const int b = 4, steps = 10;
  const std::vector<float> reference =
      TrainOne(Spec(model, workers * replicas * b), steps);
  const auto got =
      TrainWorkers(Spec(model, b), workers, replicas, steps, bucket_bytes);
  for (int w = 0; w < workers; ++w) {
    ASSERT_EQ(got[w].size(), reference.size());
    EXPECT_LT(RelativeDifference(got[w], reference), 1e-5)
        << model << ": worker " << w << " of " << workers << " x " << replicas
        << " replicas";
  }
  // And the comparison can fail: a single replica with batch b differs.
  EXPECT_GT(RelativeDifference(TrainOne(Spec(model, b), steps), reference),
            1e-3);
}

TEST(DistributedEquivalence, TwoWorkersTimesTwoReplicasMlp) {
  // Small buckets, so that several are all-reduced while backward runs.
  ExpectEquivalent("mlp_seed", 2, 2, 16 << 10);
}

TEST(DistributedEquivalence, ThreeWorkersLenetCifar) {
  ExpectEquivalent("lenet_cifar", 3, 1, 64 << 10);
}

TEST(DistributedEquivalence, OneWorkerTwoReplicasOneBucket) {
  ExpectEquivalent("lenet_cifar", 1, 2, 25 << 20);
}

}  // namespace
}  // namespace cohort
