#include "worker/exchange/ps_exchange.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/exchange/replica_sum.h"

namespace cohort {

int64_t PsLink::TakeBytes() {
  const PsClient::Stats d = client->TakeStats();
  totals.bytes_pushed += d.bytes_pushed;
  totals.bytes_pulled += d.bytes_pulled;
  totals.push_seconds += d.push_seconds;
  totals.pull_seconds += d.pull_seconds;
  totals.max_version_lag = std::max(totals.max_version_lag, d.max_version_lag);
  return d.bytes_pushed + d.bytes_pulled;
}

PsExchange::PsExchange(std::vector<float*> replica_grads, int64_t count,
                       float* params, PsConnect connect)
    : grads_(std::move(replica_grads)),
      count_(count),
      params_(params),
      connect_(std::move(connect)) {}

absl::Status PsExchange::Setup(const std::vector<int64_t>& param_sizes) {
  ASSIGN_OR_RETURN(link_, connect_(params_, param_sizes));
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
  return WithClock(link_->client->FinishPush(), clock_);
}

absl::Status PsExchange::Pull(int64_t clock) {
  return WithClock(link_->client->Pull(clock, params_), clock);
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
