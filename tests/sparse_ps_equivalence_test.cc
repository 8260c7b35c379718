// Sparse tables on the parameter servers have the mathematics of dense
// tables: a DLRM-style model whose embedding tables live on two SYNC shards
// (embedding_bag.sparse; workers pull the rows each batch touches and push
// only their gradients) ends, after 50 steps, with the same parameters and
// the same table rows as the same model trained with dense tables by
// all-reduce, to 1e-5 relative. Adagrad's row-wise step equals its dense
// step on a row whose gradient is zero, and SGD's does trivially, so the
// two must agree whatever rows the batches touch.
//
// Everything is real but in one process: two gRPC shard servers on
// 127.0.0.1, workers as threads with their own trainers, PS clients and
// Gloo communicators over loopback, on click logs in the Criteo layout
// written here.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
#include "worker/zoo.h"

namespace cohort {
namespace {

constexpr int kShards = 2;
constexpr int kWorkers = 2;
constexpr int kReplicas = 2;
constexpr int kSteps = 50;
constexpr int kBatch = 8;       // per replica
constexpr int kTableRows = 61;  // per categorical feature
constexpr int kLines = 640;

// kLines click-log lines: a label, 13 counts (some empty), 26 hex ids
// (some empty), from a fixed linear congruential sequence, so both runs
// read the same file.
std::string WriteClickLog() {
  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/clicks.txt");
  std::ofstream out(path);
  uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  for (int i = 0; i < kLines; ++i) {
    out << (next() % 3 == 0 ? 1 : 0);
    for (int f = 0; f < 13; ++f) {
      out << '\t';
      if (next() % 7 != 0) out << next() % 50;
    }
    for (int f = 0; f < 26; ++f) {
      out << '\t';
      // Few distinct values per feature: rows repeat within and across
      // batches, which is what row merging has to get right.
      if (next() % 9 != 0) out << absl::StrFormat("%08x", next() % 40);
    }
    out << '\n';
  }
  return path;
}

// The model: 13 dense features through a bottom MLP, 26 tables of
// kTableRows x 4, DLRM's dot interaction, a top MLP.
JobSpec Spec(const std::string& file, bool sparse, const std::string& mode,
             int batch, const std::string& optimizer) {
  std::string tables;
  for (int t = 0; t < 26; ++t)
    absl::StrAppend(&tables, t ? ", " : "", kTableRows);
  const std::string text = absl::StrCat(
      "model {\n"
      "  layers { branch { combine: CONCAT\n"
      "    paths { layers { slice { begin: 0 end: 13 } }\n"
      "            layers { linear { out_features: 8 } } layers { relu {} }\n"
      "            layers { linear { out_features: 4 } } layers { relu {} } }\n"
      "    paths { layers { slice { begin: 13 end: 65 } }\n"
      "            layers { embedding_bag { rows: [",
      tables, "] dim: 4", sparse ? " sparse: true" : "",
      " } } }\n"
      "  } }\n"
      "  layers { interaction { kind: DOT dim: 4 } }\n"
      "  layers { linear { out_features: 16 } } layers { relu {} }\n"
      "  layers { linear { out_features: 1 } }\n"
      "}\n"
      "data { kind: CRITEO criteo { train: \"",
      file, "\" table_rows: ", kTableRows,
      " } }\n"
      "batch_size: ",
      batch, "\nepochs: 5\n", "optimizer { ", optimizer,
      " }\n"
      "loss: BCE_WITH_LOGITS\n"
      "eval { disable: true }\n"
      "seed: 7\n",
      mode);
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "sparse_ps.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status() << "\n" << text;
  return spec.ok() ? *spec : JobSpec();
}

// Every tensor of a run by name: the flat buffer cut by the model's
// layout, plus the sparse tables read back from the shards.
using Tensors = std::map<std::string, std::vector<float>>;

void AddFlat(const JobSpec& spec, const std::vector<float>& flat,
             Tensors* out) {
  absl::StatusOr<std::unique_ptr<Model<float>>> m =
      BuildModel<float>(spec.model(), {65}, spec.seed());
  ASSERT_TRUE(m.ok()) << m.status();
  for (const auto& e : (*m)->param_store().entries()) {
    const int64_t n = NumElements(e.shape);
    ASSERT_LE(e.offset + n, static_cast<int64_t>(flat.size())) << e.name;
    (*out)[e.name] = std::vector<float>(flat.begin() + e.offset,
                                        flat.begin() + e.offset + n);
  }
}

// Worker w of kWorkers x kReplicas over `group`'s Gloo communicators.
DistributedContext WorkerContext(const JobSpec& spec, LocalGroup& group,
                                 int w) {
  DistributedContext d;
  d.rank = w;
  d.world_size = kWorkers;
  d.replica_offset = w * kReplicas;
  d.total_replicas = kWorkers * kReplicas;
  d.comm = &group.comm(w);
  d.epoch_seed = [&spec](int64_t) -> absl::StatusOr<uint64_t> {
    return spec.seed();
  };
  return d;
}

// Trains kSteps as worker w; its final flat parameters into `params`.
void TrainWorker(const JobSpec& spec, int w, DistributedContext* d,
                 std::vector<float>* params) {
  TrainOptions o;
  o.quiet = true;
  o.max_steps = kSteps;
  o.replicas = kReplicas;
  o.threads = kReplicas;
  o.distributed = d;
  o.final_parameters = params;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  ASSERT_TRUE(r.ok()) << "worker " << w << ": " << r.status();
}

// Dense tables, all-reduce over Gloo: worker 0's final parameters.
Tensors TrainDenseAllReduce(const JobSpec& spec) {
  absl::StatusOr<std::unique_ptr<LocalGroup>> group =
      LocalGroup::Connect(kWorkers, GlooOptions());
  EXPECT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<float>> params(kWorkers);
  (*group)->Run([&](int w) {
    DistributedContext d = WorkerContext(spec, **group, w);
    TrainWorker(spec, w, &d, &params[w]);
  });
  Tensors out;
  AddFlat(spec, params[0], &out);
  return out;
}

struct PsSetupState {
  std::vector<Partition> plan;
  std::vector<SparseTableInfo> tables;
};

PsClientOptions ClientOptions(const std::vector<std::string>& shards,
                              const PsSetupState& state, int w) {
  PsClientOptions po;
  po.shard_addresses = shards;
  po.partitions = state.plan;
  po.tables = state.tables;
  po.worker_id = absl::StrCat("test-worker-", w);
  po.rank = w;
  po.rpc_timeout = absl::Seconds(30);
  return po;
}

// Sparse tables on two SYNC shards: worker 0's dense parameters, and every
// row of every table read from the shards afterwards.
Tensors TrainSparsePs(const JobSpec& spec, std::vector<ShardStats>* stats) {
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
  absl::StatusOr<std::unique_ptr<LocalGroup>> group =
      LocalGroup::Connect(kWorkers, GlooOptions());
  EXPECT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<float>> params(kWorkers);
  PsSetupState state;  // rank 0's, for reading the tables back
  (*group)->Run([&](int w) {
    PsLink link;
    DistributedContext d = WorkerContext(spec, **group, w);
    d.ps_mode = true;
    d.ps_connect = [&, w](float* p, const std::vector<int64_t>& sizes,
                          const std::vector<SparseTableInfo>& tables)
        -> absl::StatusOr<PsLink*> {
      PsSetupState mine;
      ASSIGN_OR_RETURN(mine.plan, PlanPartitions(sizes, kShards,
                                                 spec.ps().partition_bytes()));
      mine.tables = tables;
      ASSIGN_OR_RETURN(link.client,
                       PsClient::Create(ClientOptions(addresses, mine, w)));
      if (w == 0) {
        state = mine;
        RETURN_IF_ERROR(link.client->Init(p, kWorkers, kWorkers * kReplicas));
      }
      RETURN_IF_ERROR(link.client->Pull(0, p));
      return &link;
    };
    TrainWorker(spec, w, &d, &params[w]);
  });
  Tensors out;
  AddFlat(spec, params[0], &out);
  // Every row of every table, as a worker would pull them for step kSteps.
  absl::StatusOr<std::unique_ptr<PsClient>> reader =
      PsClient::Create(ClientOptions(addresses, state, 0));
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<int64_t> ids(kTableRows);
  for (int64_t i = 0; i < kTableRows; ++i) ids[i] = i;
  for (const SparseTableInfo& t : state.tables) {
    std::vector<float> rows(kTableRows * t.dim());
    const PsRowRequest request{t.id(), ids, rows.data()};
    const absl::Status s = (*reader)->PullRows(kSteps, {&request, 1});
    EXPECT_TRUE(s.ok()) << s;
    out[t.name()] = std::move(rows);
  }
  for (auto& s : servers) {
    stats->push_back(s->TakeStats());
    s->Shutdown();
  }
  return out;
}

// max |a - b| over max |b|, over every tensor of `b`.
double RelativeDifference(const Tensors& a, const Tensors& b) {
  double diff = 0, scale = 0;
  for (const auto& [name, want] : b) {
    auto it = a.find(name);
    EXPECT_TRUE(it != a.end()) << name << " missing";
    if (it == a.end() || it->second.size() != want.size()) return 1e30;
    for (size_t i = 0; i < want.size(); ++i) {
      diff = std::max(diff, std::abs(1.0 * it->second[i] - want[i]));
      scale = std::max(scale, std::abs(1.0 * want[i]));
    }
  }
  return diff / scale;
}

void ExpectSparseEqualsDense(const std::string& optimizer) {
  SCOPED_TRACE(optimizer);
  const std::string file = WriteClickLog();
  const std::string ps =
      absl::StrCat("mode: PS\nps { shards: ", kShards,
                   " consistency: SYNC rpc_timeout_ms: 30000 }\n");
  const Tensors dense =
      TrainDenseAllReduce(Spec(file, false, "", kBatch, optimizer));
  std::vector<ShardStats> stats;
  const Tensors sparse =
      TrainSparsePs(Spec(file, true, ps, kBatch, optimizer), &stats);
  ASSERT_EQ(sparse.size(), dense.size());
  const double difference = RelativeDifference(sparse, dense);
  std::printf("sparse PS against dense all-reduce after %d steps: %.3g\n",
              kSteps, difference);
  EXPECT_LT(difference, 1e-5);
  // The shards held only rows a gradient reached, and moved rows.
  int64_t held = 0;
  for (const ShardStats& s : stats) {
    EXPECT_GT(s.rows_held(), 0);
    EXPECT_GT(s.rows_pushed(), 0);
    EXPECT_GT(s.rows_pulled(), 0);
    EXPECT_EQ(s.version(), kSteps);
    held += s.rows_held();
  }
  EXPECT_LE(held, 26 * kTableRows);
  std::printf("rows held on the shards: %lld of %d\n",
              static_cast<long long>(held), 26 * kTableRows);
  // And the comparison can fail: another batch size trains differently.
  const Tensors other =
      TrainDenseAllReduce(Spec(file, false, "", kBatch / 2, optimizer));
  EXPECT_GT(RelativeDifference(other, dense), 1e-3);
}

TEST(SparsePsEquivalence, SyncAdagradEqualsDenseAllReduce) {
  ExpectSparseEqualsDense("kind: ADAGRAD lr: 0.05 lr_decay: 0.01");
}

TEST(SparsePsEquivalence, SyncSgdEqualsDenseAllReduce) {
  ExpectSparseEqualsDense("kind: SGD lr: 0.1");
}

}  // namespace
}  // namespace cohort
