// ShardState's pulls and statistics: the consistency model's wait for a
// pull (shard_state.h says what each model waits for) and what the shard
// reports.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/ps_limits.h"
#include "common/status_macros.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace {

const absl::Status& ShuttingDown() {
  static const absl::Status* s =
      new absl::Status(absl::UnavailableError("shard shutting down"));
  return *s;
}

}  // namespace

int64_t ShardState::MinClockLocked() const {
  if (job_.ps().consistency() != SYNC) {
    return total_replicas_ > 0 ? watermark_ / total_replicas_ : 0;
  }
  if (clocks_.empty()) return 0;
  return *std::min_element(clocks_.begin(), clocks_.end());
}

bool ShardState::PullReadyLocked(int64_t clock) const {
  if (shut_down_) return true;
  if (!initialized_) return false;
  switch (job_.ps().consistency()) {
    case SYNC:
      return next_sync_clock_ >= clock;  // steps applied
    case SSP:
      return watermark_ >= (clock - job_.ps().staleness()) * total_replicas_;
    default:
      return true;
  }
}

std::string ShardState::SlowestLocked() const {
  if (!initialized_) return "no Init from rank 0 yet";
  if (job_.ps().consistency() != SYNC) {
    return absl::StrCat("chunk ", watermark_, " (round ", MinClockLocked(),
                        ") is not pushed yet");
  }
  const int64_t min = MinClockLocked();
  std::vector<std::string> ranks;
  for (size_t r = 0; r < clocks_.size(); ++r) {
    if (clocks_[r] == min) ranks.push_back(absl::StrCat(r));
  }
  return absl::StrCat("slowest rank(s) ", absl::StrJoin(ranks, ", "),
                      " at clock ", min);
}

absl::Status ShardState::WaitReadyLocked(int32_t rank, int64_t clock,
                                         absl::Time deadline,
                                         const std::string& what) {
  if (clock < 0 || clock > kMaxClock) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": clock is outside [0, ", kMaxClock, "]"));
  }
  if (absl::Status s = AwaitingRestoreLocked(what); !s.ok()) return s;
  if (restored_ && initialized_ && !shut_down_ && rank >= 0 &&
      rank < world_size_) {
    RecoverOnPullLocked(rank, clock);
  }
  const absl::Time start = absl::Now();
  bool waited = false;
  while (!PullReadyLocked(clock)) {
    waited = true;
    if (changed_.WaitWithDeadline(&mu_, deadline) && !PullReadyLocked(clock)) {
      wait_ += absl::Now() - start;
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": waited ", absl::FormatDuration(absl::Now() - start), "; ",
          SlowestLocked()));
    }
  }
  if (waited) wait_ += absl::Now() - start;
  if (shut_down_) return ShuttingDown();
  if (rank < 0 || rank >= world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rank is outside [0, ", world_size_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardState::Snapshot> ShardState::WaitForPull(
    int32_t rank, int64_t clock, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(
      WaitReadyLocked(rank, clock, deadline,
                      absl::StrCat("pull from rank ", rank, " for clock ",
                                   clock, " on shard ", shard_index_)));
  Snapshot snap;
  snap.version = version_;
  snap.min_clock = MinClockLocked();
  snap.partitions.reserve(parts_.size());
  snap.values.reserve(parts_.size());
  for (const Part& p : parts_) {
    snap.partitions.push_back(p.partition);
    snap.values.push_back(p.params);
    bytes_pulled_ += p.params->size() * 4;
  }
  ++pulls_;
  ++window_pulls_;
  return snap;
}

ShardStats ShardState::StatsLocked() const {
  ShardStats s;
  s.set_pushes(pushes_);
  s.set_pulls(pulls_);
  s.set_duplicate_pushes(duplicates_);
  s.set_bytes_pushed(bytes_pushed_);
  s.set_bytes_pulled(bytes_pulled_);
  const double window = absl::ToDoubleSeconds(absl::Now() - window_start_);
  if (window > 0) {
    s.set_pushes_per_s(window_pushes_ / window);
    s.set_pulls_per_s(window_pulls_ / window);
  }
  s.set_version(version_);
  s.set_min_clock(MinClockLocked());
  for (int64_t n : staleness_) s.add_staleness_histogram(n);
  s.set_wait_s(absl::ToDoubleSeconds(wait_));
  s.set_checkpoint_version(checkpoint_version_);
  s.set_restored(restored_);
  s.set_restored_version(restored_version_);
  int64_t held = 0;
  for (const auto& t : tables_) held += t->size();
  s.set_rows_held(held);
  s.set_rows_pushed(rows_pushed_);
  s.set_rows_pulled(rows_pulled_);
  return s;
}

ShardStats ShardState::Stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return StatsLocked();
}

ShardStats ShardState::TakeStats() {
  absl::MutexLock lock(&mu_);
  ShardStats s = StatsLocked();
  window_start_ = absl::Now();
  window_pushes_ = 0;
  window_pulls_ = 0;
  return s;
}

}  // namespace cohort
