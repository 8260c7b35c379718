// Parameter-server mode with SYNC consistency has the mathematics of one
// replica with the whole batch: W workers x R replicas x per-replica batch
// b, pushing each worker's mean gradient to two shards that average them
// (weighted by replicas) and run the optimizer, must end with the same
// parameters as 1 worker x 1 replica with batch W*R*b after K steps.
//
// Everything is real but in one process: two gRPC shard servers on
// 127.0.0.1, workers as threads, each with its own trainer and PsClient
// and a Gloo communicator over loopback (evaluation still sums over it).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "client/ps_client.h"
#include "common/partition.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "server/ps/shard_server.h"
#include "worker/comm/communicator.h"
#include "worker/comm/test_ranks.h"
#include "worker/exchange/ps_exchange.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

constexpr int kShards = 2;

// mlp_seed (no BatchNorm): 22210 parameters, cut into partitions of 4096
// elements at most, so each shard holds several.
JobSpec Spec(const std::string& optimizer, int batch,
             const std::string& consistency = "SYNC") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat("model { zoo: \"mlp_seed\" }\n"
                   "data { kind: SYNTHETIC synthetic { shape: 100 "
                   "train_samples: 512 test_samples: 64 } }\n"
                   "batch_size: ",
                   batch,
                   "\nepochs: 1\n"
                   "optimizer { ",
                   optimizer,
                   " }\n"
                   "seed: 11\n"
                   "mode: PS\n"
                   "ps { shards: 2 consistency: ",
                   consistency,
                   " partition_bytes: 16384 rpc_timeout_ms: 20000 }\n"),
      "ps_equivalence.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// One process, one replica, no parameter server (the trainer ignores the
// spec's mode without a DistributedContext).
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

// What a worker's trainer reported and ended with.
struct WorkerOutcome {
  std::vector<float> params;
  int64_t first_reported_bytes = -1;  // bytes_allreduced, first progress
  int64_t steps = 0;
  double test_accuracy = -1;
};

// How the workers of TrainWorkersPs run.
struct PsRun {
  int workers = 2;
  int replicas = 2;
  int steps = 6;
  absl::Duration collective_timeout = absl::Seconds(20);
  // The least time each of worker 1's steps takes (a straggler).
  absl::Duration worker1_delay = absl::ZeroDuration();
};

// The worker process's PS wiring, with the plan computed here instead of
// by the coordinator. Worker w != 0 scrambles its initial parameters first:
// training must start from the shards' (rank 0's) values all the same.
void WirePs(const JobSpec& spec, const std::vector<std::string>& shards, int w,
            int workers, int replicas, PsLink* link, DistributedContext* d) {
  d->ps_mode = true;
  d->ps_connect =
      [=, &spec](
          float* params, const std::vector<int64_t>& sizes,
          const std::vector<SparseTableInfo>&) -> absl::StatusOr<PsLink*> {
    ASSIGN_OR_RETURN(
        std::vector<Partition> plan,
        PlanPartitions(sizes, kShards, spec.ps().partition_bytes()));
    EXPECT_GT(plan.size(), 2 * kShards);
    PsClientOptions po;
    po.shard_addresses = shards;
    po.partitions = plan;
    po.worker_id = absl::StrCat("test-worker-", w);
    po.rank = w;
    po.rpc_timeout = absl::Seconds(20);
    ASSIGN_OR_RETURN(link->client, PsClient::Create(po));
    int64_t n = 0;
    for (int64_t s : sizes) n += s;
    if (w == 0) {
      RETURN_IF_ERROR(link->client->Init(params, workers, workers * replicas));
    } else {
      std::fill(params, params + n, 0.5f);
    }
    RETURN_IF_ERROR(link->client->Pull(0, params));
    return link;
  };
}

// `shard_stats`, when given, receives each shard's statistics at the end.
std::vector<WorkerOutcome> TrainWorkersPs(
    const JobSpec& spec, const PsRun& run,
    std::vector<ShardStats>* shard_stats = nullptr) {
  const int workers = run.workers, replicas = run.replicas;
  std::vector<std::unique_ptr<ShardServer>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < kShards; ++i) {
    ShardServerOptions so;
    so.job = spec;
    so.shard_index = i;
    absl::StatusOr<std::unique_ptr<ShardServer>> s = ShardServer::Start(so);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    addresses.push_back((*s)->address());
    servers.push_back(*std::move(s));
  }
  GlooOptions g;
  g.timeout = run.collective_timeout;
  absl::StatusOr<std::unique_ptr<LocalGroup>> group =
      LocalGroup::Connect(workers, g);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return {};
  std::vector<WorkerOutcome> out(workers);
  InMemoryKv claims;  // the coordinator's KV store, for SSP and ASYNC
  (*group)->Run([&](int w) {
    PsLink link;
    DistributedContext d;
    d.rank = w;
    d.world_size = workers;
    d.replica_offset = w * replicas;
    d.total_replicas = workers * replicas;
    d.comm = &(*group)->comm(w);
    d.epoch_seed = [&spec](int64_t) -> absl::StatusOr<uint64_t> {
      return spec.seed();
    };
    d.on_step = [&out, w](const WorkerProgress& p) {
      if (out[w].first_reported_bytes < 0) {
        out[w].first_reported_bytes = p.bytes_allreduced();
      }
      return absl::OkStatus();
    };
    d.claim_chunks = [&claims](int64_t epoch,
                               int count) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(const int64_t end,
                       claims.Add(absl::StrCat("chunks/", epoch), count));
      return end - count;
    };
    WirePs(spec, addresses, w, workers, replicas, &link, &d);
    TrainOptions o;
    // Worker 1's steps take at least worker1_delay: a straggler.
    if (w == 1) o.min_step_seconds = absl::ToDoubleSeconds(run.worker1_delay);
    o.quiet = true;
    o.max_steps = run.steps;
    o.replicas = replicas;
    o.threads = replicas;
    o.distributed = &d;
    o.final_parameters = &out[w].params;
    absl::StatusOr<TrainResult> r = Train(spec, o);
    ASSERT_TRUE(r.ok()) << "worker " << w << ": " << r.status();
    out[w].steps = r->steps;
    out[w].test_accuracy = r->test_accuracy;
  });
  for (auto& s : servers) {
    if (shard_stats != nullptr) shard_stats->push_back(s->TakeStats());
    s->Shutdown();
  }
  return out;
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

void ExpectEquivalent(const std::string& optimizer) {
  const PsRun run;
  const int workers = run.workers, replicas = run.replicas, steps = run.steps;
  const int b = 4;
  const std::vector<float> reference =
      TrainOne(Spec(optimizer, workers * replicas * b), steps);
  const std::vector<WorkerOutcome> got =
      TrainWorkersPs(Spec(optimizer, b), run);
  ASSERT_EQ(got.size(), workers);
  for (int w = 0; w < workers; ++w) {
    ASSERT_EQ(got[w].params.size(), reference.size()) << "worker " << w;
    EXPECT_EQ(got[w].steps, steps);
    EXPECT_LT(RelativeDifference(got[w].params, reference), 1e-5)
        << optimizer << ": worker " << w << " of " << workers << " x "
        << replicas << " replicas";
    // The first progress comes after step 0: one push and one pull of the
    // whole flat buffer at least.
    EXPECT_GE(got[w].first_reported_bytes,
              static_cast<int64_t>(2 * sizeof(float) * reference.size()))
        << "worker " << w;
  }
  // And the comparison can fail: a single replica with batch b differs.
  EXPECT_GT(RelativeDifference(TrainOne(Spec(optimizer, b), steps), reference),
            1e-3);
}

TEST(PsEquivalence, SyncSgdMomentumTwoWorkersTimesTwoReplicas) {
  ExpectEquivalent("kind: SGD lr: 0.05 momentum: 0.9");
}

TEST(PsEquivalence, SyncAdamTwoWorkersTimesTwoReplicas) {
  ExpectEquivalent("kind: ADAM lr: 0.001");
}

// RMSprop in the shards, with biases kept out of weight decay
// (each shard finds its partitions' biases from the job's layer specs).
// Without momentum: RMSprop's first steps are about lr * sign(g), so an
// element whose gradient is near 0 magnifies the two runs' different
// summation orders, and momentum carries that on: 1.5e-5 relative after 6
// steps with momentum 0.5 (with or without the exclusion, and centered
// too), past this test's 1e-5.
TEST(PsEquivalence, SyncRmspropWithoutDecayOnBiases) {
  ExpectEquivalent(
      "kind: RMSPROP lr: 0.001 weight_decay: 0.05 "
      "no_decay_bias_and_norm: true");
}

// Adagrad in the shards: its sums and step count live beside each
// partition, as RMSprop's averages do.
TEST(PsEquivalence, SyncAdagrad) {
  ExpectEquivalent("kind: ADAGRAD lr: 0.01 lr_decay: 0.01");
}

// With SSP and ASYNC shards the workers share the data: a fast worker
// claims the chunks a straggler does not get to, and every chunk is pushed
// exactly once. Each of worker 1's steps takes `delay`. With ASYNC worker 0
// never waits, so it does nearly all of the 16 chunks (8 rounds of 2) and
// ends long before worker 1, not even waiting at evaluation: a cross-worker
// collective (timing out after 1 s) would fail it. With SSP(2) worker 0 may
// run only 2 rounds ahead of worker 1's oldest chunk, so it waits, but
// still takes more chunks.
void ExpectSharedData(const char* consistency, absl::Duration delay,
                      int min_ratio) {
  SCOPED_TRACE(consistency);
  PsRun run;
  run.replicas = 1;
  run.steps = 8;
  run.collective_timeout = absl::Seconds(1);
  run.worker1_delay = delay;
  std::vector<ShardStats> shards;
  const JobSpec spec = Spec("kind: SGD lr: 0.05 momentum: 0.9", 8, consistency);
  const std::vector<WorkerOutcome> got = TrainWorkersPs(spec, run, &shards);
  ASSERT_EQ(got.size(), 2);
  EXPECT_EQ(got[0].steps + got[1].steps, 2 * run.steps);
  EXPECT_GT(got[0].steps, min_ratio * got[1].steps);
  for (int w = 0; w < 2; ++w) {
    // The whole test set, with this worker's own parameters.
    EXPECT_GE(got[w].test_accuracy, 0) << "worker " << w;
    for (float p : got[w].params) ASSERT_TRUE(std::isfinite(p));
  }
  ASSERT_EQ(shards.size(), kShards);
  for (const ShardStats& st : shards) {
    EXPECT_EQ(st.pushes(), 2 * run.steps);
    EXPECT_EQ(st.min_clock(), run.steps);  // every chunk applied
    EXPECT_EQ(st.duplicate_pushes(), 0);
  }
}

TEST(PsShared, AsyncFastWorkerTakesTheStragglersChunks) {
  ExpectSharedData("ASYNC", absl::Milliseconds(1500), 4);
}

TEST(PsShared, SspFastWorkerTakesMoreChunksWithinTheBound) {
  ExpectSharedData("SSP", absl::Milliseconds(400), 1);
}

TEST(PsTrainer, RejectsPsModeWithoutCallbacksAndBadSlowdown) {
  DistributedContext d;
  d.ps_mode = true;
  TrainOptions o;
  o.quiet = true;
  o.distributed = &d;
  EXPECT_EQ(Trainer::Create(Spec("kind: SGD lr: 0.05", 4), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  TrainOptions slow;
  slow.quiet = true;
  slow.slowdown = 0.5;
  absl::Status s =
      Trainer::Create(Spec("kind: SGD lr: 0.05", 4), slow).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("slowdown"), absl::string_view::npos) << s;
}

// A straggler computes the same steps, only later: with slowdown 20 each
// step sleeps 19 times its compute, so the run takes several times longer.
// Both runs count each step as at least 5 ms of compute: this model's
// steps take a fraction of that, so that a one-time cost of the first run
// in the process (a kernel generated on its first call) would otherwise
// outweigh the slow run's sleeps; 0.1 s a slow step against 5 ms a fast one
// leaves room for any such cost and for a loaded machine.
TEST(PsTrainer, SlowdownChangesTimeNotResults) {
  const JobSpec spec = Spec("kind: SGD lr: 0.05 momentum: 0.9", 64);
  TrainOptions o;
  o.quiet = true;
  o.max_steps = 8;
  o.min_step_seconds = 0.005;
  std::vector<float> fast, slow;
  o.final_parameters = &fast;
  absl::StatusOr<TrainResult> f = Train(spec, o);
  ASSERT_TRUE(f.ok()) << f.status();
  o.slowdown = 20.0;
  o.final_parameters = &slow;
  absl::StatusOr<TrainResult> s = Train(spec, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(fast, slow);
  EXPECT_GT(s->train_seconds, 3 * f->train_seconds)
      << "fast " << f->train_seconds << " s, slow " << s->train_seconds << " s";
}

}  // namespace
}  // namespace cohort
