#include "worker/exchange/ps_exchange.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/sparse_update_rules.h"
#include "worker/exchange/replica_sum.h"

namespace cohort {

int64_t PsLink::TakeBytes() {
  const PsClient::Stats d = client->TakeStats();
  totals.bytes_pushed += d.bytes_pushed;
  totals.bytes_pulled += d.bytes_pulled;
  totals.push_seconds += d.push_seconds;
  totals.pull_seconds += d.pull_seconds;
  totals.rows_pushed += d.rows_pushed;
  totals.rows_pulled += d.rows_pulled;
  totals.max_version_lag = std::max(totals.max_version_lag, d.max_version_lag);
  return d.bytes_pushed + d.bytes_pulled;
}

PsExchange::PsExchange(std::vector<float*> replica_grads, int64_t count,
                       float* params, PsConnect connect,
                       std::vector<std::vector<SparseTable*>> replica_tables,
                       std::vector<SparseTableInfo> tables)
    : grads_(std::move(replica_grads)),
      count_(count),
      params_(params),
      connect_(std::move(connect)),
      replica_tables_(std::move(replica_tables)),
      tables_(std::move(tables)) {
  CHECK(tables_.empty() || replica_tables_.size() == grads_.size())
      << "sparse tables for " << replica_tables_.size() << " of "
      << grads_.size() << " replicas";
  for (const std::vector<SparseTable*>& replica : replica_tables_) {
    CHECK_EQ(replica.size(), tables_.size());
    for (size_t k = 0; k < tables_.size(); ++k) {
      CHECK_EQ(replica[k]->dim(), tables_[k].dim());
    }
  }
}

absl::Status PsExchange::Setup(const std::vector<int64_t>& param_sizes) {
  ASSIGN_OR_RETURN(link_, connect_(params_, param_sizes, tables_));
  bytes_ += link_->TakeBytes();
  return absl::OkStatus();
}

void PsExchange::BeginStep(const ExchangeStep& step) {
  {
    absl::MutexLock lock(&mu_);
    ready_.assign(grads_.size(), count_);
    active_ = step.active;
    final_from_ = count_;
  }
  PsPush push;
  push.clock = step.clock;
  push.lr = step.lr;
  push.weight = step.active;
  push.first_chunk = step.first_chunk;
  clock_ = step.clock;
  fetch_clock_ = step.clock;
  link_->client->BeginPush(grads_[0], push);
}

// Once every replica taking part has passed a point, the range behind it
// becomes their mean in replica 0's buffer and goes out while backward
// goes on.
void PsExchange::RangeReady(int replica, int64_t offset) {
  absl::MutexLock lock(&mu_);
  ready_[replica] = std::min(ready_[replica], offset);
  const int64_t from =
      *std::max_element(ready_.begin(), ready_.begin() + active_);
  if (from >= final_from_) return;
  SumReplicasInto(grads_, active_, from, final_from_, 1.0f / active_);
  final_from_ = from;
  link_->client->MarkReady(from);
}

absl::Status PsExchange::Finish() {
  for (size_t r = 0; r < grads_.size(); ++r) {
    RangeReady(static_cast<int>(r), 0);
  }
  absl::Status rows;
  if (!tables_.empty()) {
    int active = 0;
    {
      absl::MutexLock lock(&mu_);
      active = active_;
    }
    rows = link_->client->SetPushRows(StepRows(active));
  }
  // The push goes on without rows that were refused: the shards' threads
  // wait for its end.
  absl::Status pushed = link_->client->FinishPush();
  return WithClock(rows.ok() ? pushed : rows, clock_);
}

std::vector<PsRows> PsExchange::StepRows(int active) const {
  std::vector<PsRows> out(tables_.size());
  std::vector<int64_t> ids;
  std::vector<float> grads;
  for (size_t k = 0; k < tables_.size(); ++k) {
    const int64_t dim = tables_[k].dim();
    ids.clear();
    grads.clear();
    for (int r = 0; r < active; ++r) {
      const SparseTable& t = *replica_tables_[r][k];
      CHECK_EQ(t.grads.size(), t.ids.size() * dim);
      ids.insert(ids.end(), t.ids.begin(), t.ids.end());
      grads.insert(grads.end(), t.grads.begin(), t.grads.end());
    }
    out[k].table = static_cast<int>(k);
    MergeRows(ids, grads.data(), dim, &out[k].ids, &out[k].grads);
    // As SumReplicasInto scales the dense part.
    if (active > 1) {
      const float scale = 1.0f / active;
      for (float& g : out[k].grads) g *= scale;
    }
  }
  return out;
}

absl::Status PsExchange::Pull(int64_t clock) {
  fetch_clock_ = clock;
  return WithClock(link_->client->Pull(clock, params_), clock);
}

absl::Status PsExchange::Fetch(absl::Span<const RowRequest> requests) {
  std::vector<PsRowRequest> pull(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    pull[i].table = requests[i].table;
    pull[i].ids = requests[i].ids;
    pull[i].values = requests[i].values;
  }
  const int64_t clock = fetch_clock_;
  absl::Status s = link_->client->PullRows(clock, pull);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameter server, clock ",
                                               clock, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status PsExchange::WithClock(const absl::Status& s, int64_t clock) {
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameter server, clock ",
                                               clock, ": ", s.message()));
  }
  bytes_ += link_->TakeBytes();
  return absl::OkStatus();
}

ExchangeStats PsExchange::TakeStats() {
  ExchangeStats s;
  s.bytes = std::exchange(bytes_, 0);
  return s;
}

}  // namespace cohort
