// ShardState's sparse tables (shard_state.h's header comment): their Init
// checks, a push's rows (checked, accumulated for SYNC, stepped), PullRows,
// and the stores a capture restores.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/optimizer_options.h"
#include "common/sparse_rows.h"
#include "common/status_macros.h"
#include "server/ps/shard_state.h"

namespace cohort {

int ShardState::NumShardsLocked() const {
  return std::max(1, job_.ps().shards());
}

absl::Status ShardState::CheckTablesLocked(const InitHeader& h) const {
  const std::string what = absl::StrCat("init from ", h.worker_id());
  RETURN_IF_ERROR(CheckTables(h.tables(), what));
  if (h.tables().empty()) return absl::OkStatus();
  const absl::StatusOr<std::unique_ptr<SparseUpdateRule>> rule =
      MakeSparseUpdateRule(RuleOptionsOf(job_.optimizer()), 0,
                           h.tables(0).dim());
  if (!rule.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the sparse tables need an optimizer that steps rows (SGD ",
        "without momentum, ADAGRAD or ADAM, none with weight decay), not ",
        OptimizerSpec::Kind_Name(job_.optimizer().kind()), ": ",
        rule.status().message()));
  }
  return absl::OkStatus();
}

bool ShardState::SameTablesLocked(const InitHeader& h) const {
  if (h.tables_size() != static_cast<int>(tables_.size())) return false;
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (!SameTable(h.tables(i), tables_[i]->table())) return false;
  }
  return true;
}

absl::StatusOr<std::vector<std::unique_ptr<RowStore>>>
ShardState::MakeStoresLocked(const std::vector<SparseTableInfo>& tables) const {
  std::vector<std::unique_ptr<RowStore>> stores;
  for (const SparseTableInfo& t : tables) {
    ASSIGN_OR_RETURN(std::unique_ptr<RowStore> store,
                     RowStore::Make(t, RuleOptionsOf(job_.optimizer())));
    stores.push_back(std::move(store));
  }
  return stores;
}

void ShardState::SetTablesLocked(
    std::vector<std::unique_ptr<RowStore>> stores) {
  tables_ = std::move(stores);
  sparse_.tables.clear();
  for (const auto& t : tables_) sparse_.tables.push_back(t->table());
  sparse_.shard_index = shard_index_;
  sparse_.num_shards = NumShardsLocked();
}

SparseLayout ShardState::sparse_layout() const {
  absl::ReaderMutexLock lock(&mu_);
  return sparse_;
}

absl::Status ShardState::SortPushedRowsLocked(const PushHeader& h,
                                              PushedRows& rows) const {
  const std::string what =
      absl::StrCat("push from rank ", h.rank(), " (", h.worker_id(), ")");
  if (rows.tables.empty()) return absl::OkStatus();
  if (rows.tables.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rows for ", rows.tables.size(),
                     " sparse tables, the shard has ", tables_.size()));
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    PushedRows::Table& in = rows.tables[t];
    const int64_t dim = tables_[t]->dim();
    if (in.grads.size() != in.ids.size() * dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": sparse table ", t, " has ", in.ids.size(), " rows and ",
          in.grads.size(), " gradient values (", dim, " per row)"));
    }
    RETURN_IF_ERROR(CheckRowIds(sparse_, t, in.ids, what));
    std::vector<int64_t> order(in.ids.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return in.ids[a] < in.ids[b]; });
    PushedRows::Table sorted;
    sorted.ids.reserve(order.size());
    sorted.grads.resize(in.grads.size());
    for (size_t k = 0; k < order.size(); ++k) {
      const int64_t id = in.ids[order[k]];
      if (k > 0 && id == sorted.ids.back()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": sparse table ", t, " row id ", id,
                         " is pushed twice (a push holds each row once)"));
      }
      sorted.ids.push_back(id);
      std::memcpy(sorted.grads.data() + k * dim,
                  in.grads.data() + order[k] * dim, dim * sizeof(float));
    }
    in = std::move(sorted);
  }
  return absl::OkStatus();
}

// The same arithmetic as AccumulateLocked's dense sums, row by row: a row's
// first gradient is scaled by the weight (when it is not 1), later ones are
// added times theirs, so that a row equals the dense sum of the gradients
// with zeros for the pushes that lacked it.
void ShardState::AccumulateRowsLocked(Pending& p, const PushedRows& rows,
                                      int32_t weight) {
  if (p.rows.empty()) p.rows.resize(tables_.size());
  const float w = static_cast<float>(weight);
  for (size_t t = 0; t < rows.tables.size(); ++t) {
    const PushedRows::Table& in = rows.tables[t];
    PendingRows& out = p.rows[t];
    const int64_t dim = tables_[t]->dim();
    for (size_t k = 0; k < in.ids.size(); ++k) {
      const float* g = in.grads.data() + k * dim;
      auto [it, fresh] = out.index.try_emplace(in.ids[k], out.ids.size());
      if (fresh) {
        out.ids.push_back(in.ids[k]);
        out.sum.insert(out.sum.end(), g, g + dim);
        if (weight != 1) {
          float* x = out.sum.data() + out.sum.size() - dim;
          for (int64_t i = 0; i < dim; ++i) x[i] *= w;
        }
        continue;
      }
      float* s = out.sum.data() + it->second * dim;
      for (int64_t i = 0; i < dim; ++i) s[i] += w * g[i];
    }
  }
}

PushedRows ShardState::AveragedRowsLocked(Pending& p, float inv) {
  PushedRows out;
  out.tables.resize(p.rows.size());
  for (size_t t = 0; t < p.rows.size(); ++t) {
    PendingRows& in = p.rows[t];
    const int64_t dim = tables_[t]->dim();
    for (float& x : in.sum) x *= inv;
    std::vector<int64_t> order(in.ids.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return in.ids[a] < in.ids[b]; });
    PushedRows::Table& sorted = out.tables[t];
    sorted.ids.reserve(order.size());
    sorted.grads.resize(in.sum.size());
    for (size_t k = 0; k < order.size(); ++k) {
      sorted.ids.push_back(in.ids[order[k]]);
      std::memcpy(sorted.grads.data() + k * dim, in.sum.data() + order[k] * dim,
                  dim * sizeof(float));
    }
  }
  return out;
}

void ShardState::StepTablesLocked(const PushedRows& rows, double lr) {
  static const PushedRows::Table kNone;
  for (size_t t = 0; t < tables_.size(); ++t) {
    const PushedRows::Table& r =
        t < rows.tables.size() ? rows.tables[t] : kNone;
    // The rows were checked (SortPushedRowsLocked): a failure is a bug.
    const absl::Status s = tables_[t]->Apply(r.ids, r.grads.data(), lr);
    CHECK(s.ok()) << s;
  }
}

absl::StatusOr<ShardState::RowsSnapshot> ShardState::PullRows(
    const PullRowsRequest& request, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const std::string what =
      absl::StrCat("pull of rows from rank ", request.rank(), " for clock ",
                   request.clock(), " on shard ", shard_index_);
  RETURN_IF_ERROR(
      WaitReadyLocked(request.rank(), request.clock(), deadline, what));
  for (const RowChunk& c : request.tables()) {
    if (!c.data().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the request for sparse table ", c.table(),
                       " carries data (a pull names row ids only)"));
    }
    RETURN_IF_ERROR(
        CheckRowIds(sparse_, c.table(),
                    absl::MakeConstSpan(c.ids().data(), c.ids_size()), what));
  }
  RowsSnapshot snap;
  snap.version = version_;
  snap.min_clock = MinClockLocked();
  for (const RowChunk& c : request.tables()) {
    const RowStore& store = *tables_[c.table()];
    RowsSnapshot::Table& out = snap.tables.emplace_back();
    out.table = c.table();
    out.dim = static_cast<int32_t>(store.dim());
    out.ids.assign(c.ids().begin(), c.ids().end());
    out.values.resize(out.ids.size() * store.dim());
    store.Read(out.ids, out.values.data());
    rows_pulled_ += out.ids.size();
    bytes_pulled_ += out.ids.size() * 8 + out.values.size() * 4;
  }
  return snap;
}

absl::StatusOr<std::vector<std::unique_ptr<RowStore>>>
ShardState::RestoreStoresLocked(const Capture& c) const {
  if (c.rows.size() != c.tables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard checkpoint: stored rows for ", c.rows.size(),
                     " sparse tables, it has ", c.tables.size()));
  }
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<RowStore>> stores,
                   MakeStoresLocked(c.tables));
  SparseLayout layout;
  layout.tables = c.tables;
  layout.shard_index = shard_index_;
  layout.num_shards = NumShardsLocked();
  for (size_t t = 0; t < stores.size(); ++t) {
    RETURN_IF_ERROR(
        CheckRowIds(layout, t, c.rows[t].ids, "shard checkpoint: stored rows"));
    if (absl::Status s = stores[t]->Restore(c.rows[t]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard checkpoint: ", s.message()));
    }
  }
  return stores;
}

}  // namespace cohort
