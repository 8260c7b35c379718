#include "fuzz/shard_seeds.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sparse_rows.h"
#include "fuzz/shard_fuzz.pb.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"

namespace cohort {
namespace fuzz {
namespace {

// A shard case: Init of two partitions (5 and 3 elements, shard 0) by two
// workers of one replica each, then a round of pushes and pulls.
ShardFuzzCase ShardCase(Consistency consistency, int optimizer) {
  ShardFuzzCase c;
  c.set_consistency(consistency);
  c.set_optimizer(optimizer);
  auto chunk = [](TensorChunk* t, int partition, int64_t offset, int n) {
    t->set_partition(partition);
    t->set_offset(offset);
    std::string data;
    for (int i = 0; i < n; ++i) {
      const float v = 0.25f * (i + 1);
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    t->set_data(data);
  };
  ShardFuzzCall* init = c.add_calls();
  InitHeader* h = init->add_init()->mutable_header();
  h->set_worker_id("w0");
  h->set_world_size(2);
  h->set_total_replicas(2);
  for (int id : {0, 1}) {
    Partition* p = h->add_partitions();
    p->set_id(id);
    p->set_shard(0);
    p->set_offset(id == 0 ? 0 : 5);
    p->set_count(id == 0 ? 5 : 3);
  }
  chunk(init->add_init()->mutable_chunk(), 0, 0, 2);
  chunk(init->add_init()->mutable_chunk(), 0, 2, 3);
  chunk(init->add_init()->mutable_chunk(), 1, 0, 3);
  for (int round = 0; round < 2; ++round) {
    for (int rank : {0, 1}) {
      ShardFuzzCall* push = c.add_calls();
      PushHeader* ph = push->add_push()->mutable_header();
      ph->set_worker_id(absl::StrCat("w", rank));
      ph->set_rank(rank);
      ph->set_seq(round + 1);
      ph->set_clock(round);
      ph->set_based_on_version(round);
      ph->set_lr(0.1);
      ph->set_weight(1);
      ph->set_first_chunk(2 * round + rank);
      chunk(push->add_push()->mutable_chunk(), 0, 0, 5);
      chunk(push->add_push()->mutable_chunk(), 1, 0, 3);
      PullRequest* pull = c.add_calls()->mutable_pull();
      pull->set_worker_id(ph->worker_id());
      pull->set_rank(rank);
      pull->set_clock(round + 1);
    }
  }
  // A retried push (duplicate seq) and the statistics.
  *c.add_calls() = c.calls(1);
  c.add_calls()->set_stats(true);
  return c;
}

// The first `n` rows of `table` that shard 0 of `shards` owns.
std::vector<int64_t> OwnedRows(int table, int shards, int n) {
  std::vector<int64_t> ids;
  for (int64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
    if (SparseRowOwner(table, id, shards) == 0) ids.push_back(id);
  }
  return ids;
}

// `n` rows of `dim` floats, as a RowChunk's data.
std::string RowData(int n, int dim, float scale) {
  std::string data;
  for (int i = 0; i < n * dim; ++i) {
    const float v = scale * ((i % 7) - 3);
    data.append(reinterpret_cast<const char*>(&v), 4);
  }
  return data;
}

// The PullRows that follows `pull` in a case with tables: rows pushed, one
// never pushed and a repeated id of each table.
PullRowsRequest PullRowsAfter(const PullRequest& pull,
                              const std::vector<int64_t> (&owned)[2]) {
  PullRowsRequest r;
  r.set_worker_id(pull.worker_id());
  r.set_rank(pull.rank());
  r.set_clock(pull.clock());
  for (int t : {0, 1}) {
    RowChunk* want = r.add_tables();
    want->set_table(t);
    for (int k : {0, 1, 3, 1}) want->add_ids(owned[t][k]);
  }
  return r;
}

// Adds two sparse tables (of `shards` shards, shard 0 this one) to a
// ShardCase, with no momentum and no weight decay (row_wise): the Init
// declares them, every push carries rows of both (rank r rows r and r + 1
// of those shard 0 owns, so that SYNC sums row 1), and every pull is
// followed by a PullRows.
void AddTables(ShardFuzzCase& c, int shards) {
  c.set_shards(shards - 1);
  c.set_row_wise(true);
  const int dims[] = {4, 2};
  InitHeader* h = c.mutable_calls(0)->mutable_init(0)->mutable_header();
  for (int t : {0, 1}) {
    SparseTableInfo* info = h->add_tables();
    info->set_id(t);
    info->set_name(absl::StrCat(t + 1, ".weight"));
    info->set_rows(t == 0 ? 1000 : 50);
    info->set_dim(dims[t]);
    info->set_seed(7 + t);
    info->set_bound(0.05);
  }
  const std::vector<int64_t> owned[2] = {OwnedRows(0, shards, 4),
                                         OwnedRows(1, shards, 4)};
  google::protobuf::RepeatedPtrField<ShardFuzzCall> calls;
  calls.Swap(c.mutable_calls());
  for (ShardFuzzCall& call : calls) {
    if (!call.push().empty()) {
      const int rank = call.push(0).header().rank();
      for (int t : {0, 1}) {
        RowChunk* rows = call.add_push()->mutable_rows();
        rows->set_table(t);
        rows->add_ids(owned[t][rank]);
        rows->add_ids(owned[t][rank + 1]);
        rows->set_data(RowData(2, dims[t], 0.125f * (rank + 1)));
      }
    }
    *c.add_calls() = call;
    if (call.has_pull()) {
      *c.add_calls()->mutable_pull_rows() = PullRowsAfter(call.pull(), owned);
    }
  }
}

}  // namespace

std::map<std::string, std::string> ShardSeeds() {
  std::map<std::string, std::string> seeds;
  seeds["sync_sgd"] = ShardCase(SYNC, 0).SerializeAsString();
  seeds["ssp_adam"] = ShardCase(SSP, 1).SerializeAsString();
  seeds["async_adamw"] = ShardCase(ASYNC, 2).SerializeAsString();
  // Sparse tables, with the optimizers they accept (SGD, ADAGRAD, ADAM:
  // optimizer indexes 0, 3, 1) and one they refuse (ADAMW).
  ShardFuzzCase c = ShardCase(SYNC, 0);
  AddTables(c, 1);
  seeds["sync_sgd_tables"] = c.SerializeAsString();
  c = ShardCase(SSP, 3);
  AddTables(c, 2);
  seeds["ssp_adagrad_tables"] = c.SerializeAsString();
  c = ShardCase(ASYNC, 1);
  AddTables(c, 3);
  seeds["async_adam_tables"] = c.SerializeAsString();
  c = ShardCase(ASYNC, 2);
  AddTables(c, 1);
  seeds["async_adamw_tables_refused"] = c.SerializeAsString();
  return seeds;
}

}  // namespace fuzz
}  // namespace cohort
