// What the tests of a shard's sparse tables share: jobs, tables, Init,
// pushes through a RowAssembler as the service makes them, and pulls.
#ifndef COHORT_SERVER_PS_SHARD_ROWS_TEST_UTIL_H_
#define COHORT_SERVER_PS_SHARD_ROWS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sparse_rows.h"
#include "gtest/gtest.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace rows_test {

// Adagrad with a decaying rate and a non-zero initial sum (a row's first
// step then differs from a fresh dense one), as a job spec with no
// defaults filled gives it.
inline JobSpec Job(Consistency c, int shards = 1,
                   OptimizerSpec::Kind kind = OptimizerSpec::ADAGRAD) {
  JobSpec job;
  OptimizerSpec* o = job.mutable_optimizer();
  o->set_kind(kind);
  o->set_lr_decay(0.01f);
  o->set_initial_accumulator_value(0.1f);
  o->set_eps(kind == OptimizerSpec::ADAGRAD ? 1e-10f : 1e-8f);
  o->set_beta1(0.9f);
  o->set_beta2(0.999f);
  job.mutable_ps()->set_shards(shards);
  job.mutable_ps()->set_consistency(c);
  if (c == SSP) job.mutable_ps()->set_staleness(1);
  job.mutable_ps()->set_rpc_timeout_ms(5000);
  return job;
}

inline SparseTableInfo Table(int32_t id, int64_t rows, int32_t dim) {
  SparseTableInfo t;
  t.set_id(id);
  t.set_name(absl::StrCat(id + 2, ".0.weight"));
  t.set_rows(rows);
  t.set_dim(dim);
  t.set_seed(77 + id);
  t.set_bound(0.25);
  return t;
}

inline std::vector<float> InitRows(const SparseTableInfo& t,
                                   const std::vector<int64_t>& ids) {
  std::vector<float> v(ids.size() * t.dim());
  for (size_t k = 0; k < ids.size(); ++k) {
    SparseRowInit(t.seed(), ids[k], t.dim(), t.bound(), v.data() + k * t.dim());
  }
  return v;
}

// Init with `tables` and, when `partition_count` > 0, one partition of that
// many elements holding `values` (zeros if empty).
inline absl::StatusOr<bool> Init(ShardState& state,
                                 const std::vector<SparseTableInfo>& tables,
                                 int world_size, int total_replicas,
                                 int64_t partition_count = 0,
                                 std::vector<float> values = {},
                                 int shard_index = 0) {
  InitHeader h;
  h.set_worker_id("w0");
  h.set_world_size(world_size);
  h.set_total_replicas(total_replicas);
  for (const SparseTableInfo& t : tables) *h.add_tables() = t;
  std::vector<std::vector<float>> parts;
  if (partition_count > 0) {
    Partition* p = h.add_partitions();
    p->set_id(0);
    p->set_shard(shard_index);
    p->set_count(partition_count);
    values.resize(partition_count);
    parts.push_back(std::move(values));
  }
  return state.Init(h, std::move(parts));
}

inline RowChunk Rows(int32_t table, const std::vector<int64_t>& ids,
                     const std::vector<float>& data) {
  RowChunk c;
  c.set_table(table);
  for (int64_t id : ids) c.add_ids(id);
  c.set_data(std::string(reinterpret_cast<const char*>(data.data()),
                         data.size() * sizeof(float)));
  return c;
}

inline PushHeader Header(int rank, uint64_t seq, int64_t clock, double lr,
                         int weight = 1, int64_t first_chunk = -1) {
  PushHeader h;
  h.set_worker_id(absl::StrCat("w", rank));
  h.set_rank(rank);
  h.set_seq(seq);
  h.set_clock(clock);
  h.set_lr(lr);
  h.set_weight(weight);
  h.set_first_chunk(first_chunk >= 0 ? first_chunk : clock);
  return h;
}

// As the service does: header check, dense chunks (one whole partition,
// when `dense` is not empty), the rows, then apply.
inline absl::StatusOr<PushResponse> Push(ShardState& state, const PushHeader& h,
                                         const std::vector<RowChunk>& rows,
                                         const std::vector<float>& dense = {}) {
  absl::StatusOr<std::vector<Partition>> layout = state.CheckPush(h);
  if (!layout.ok()) return layout.status();
  ChunkAssembler chunks(*layout, "push");
  if (!dense.empty()) {
    TensorChunk c;
    c.set_partition(0);
    c.set_data(std::string(reinterpret_cast<const char*>(dense.data()),
                           dense.size() * sizeof(float)));
    if (absl::Status s = chunks.Add(c); !s.ok()) return s;
  }
  RowAssembler assembler(state.sparse_layout(),
                         absl::StrCat("push from rank ", h.rank()));
  for (const RowChunk& c : rows) {
    if (absl::Status s = assembler.Add(c); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<std::vector<float>>> grads = chunks.Finish();
  if (!grads.ok()) return grads.status();
  return state.ApplyPush(h, *std::move(grads), assembler.Finish());
}

// The values of `ids` of `table`, read at `clock` by rank 0.
inline absl::StatusOr<std::vector<float>> PullRows(
    ShardState& state, int32_t table, const std::vector<int64_t>& ids,
    int64_t clock = 0, absl::Duration wait = absl::Milliseconds(50)) {
  PullRowsRequest r;
  r.set_worker_id("w0");
  r.set_clock(clock);
  RowChunk* c = r.add_tables();
  c->set_table(table);
  for (int64_t id : ids) c->add_ids(id);
  absl::StatusOr<ShardState::RowsSnapshot> snap =
      state.PullRows(r, absl::Now() + wait);
  if (!snap.ok()) return snap.status();
  return snap->tables.at(0).values;
}

// Rows of `table` this shard (of `shards`) owns, from row 0 up, `n` of
// them.
inline std::vector<int64_t> OwnedRows(int32_t table, int shard, int shards,
                                      int n) {
  std::vector<int64_t> ids;
  for (int64_t r = 0; static_cast<int>(ids.size()) < n; ++r) {
    if (SparseRowOwner(table, r, shards) == shard) ids.push_back(r);
  }
  return ids;
}

}  // namespace rows_test
}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_ROWS_TEST_UTIL_H_
