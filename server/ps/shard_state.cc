#include "server/ps/shard_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/ps_limits.h"
#include "client/restart_window.h"
#include "common/logging.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

constexpr int64_t kDefaultRpcTimeoutMs = 30000;
constexpr int kDefaultStaleness = 2;

const absl::Status& ShuttingDown() {
  static const absl::Status* s =
      new absl::Status(absl::UnavailableError("shard shutting down"));
  return *s;
}

bool SamePartition(const Partition& a, const Partition& b) {
  return a.id() == b.id() && a.shard() == b.shard() &&
         a.offset() == b.offset() && a.count() == b.count();
}

}  // namespace

// --- ShardState ---

ShardState::ShardState(const JobSpec& job, int shard_index)
    : staleness_(kStalenessBuckets, 0), window_start_(absl::Now()) {
  absl::Status s = Configure(job, shard_index);
  (void)s;  // cannot fail before Init
}

absl::Status ShardState::Configure(const JobSpec& job, int shard_index) {
  absl::MutexLock lock(&mu_);
  if (initialized_) {
    return absl::FailedPreconditionError(
        "cannot reconfigure a shard that is already initialized");
  }
  job_ = job;
  PsSpec* ps = job_.mutable_ps();
  if (ps->rpc_timeout_ms() <= 0) ps->set_rpc_timeout_ms(kDefaultRpcTimeoutMs);
  if (ps->consistency() == SSP && ps->staleness() <= 0) {
    ps->set_staleness(kDefaultStaleness);
  }
  shard_index_ = shard_index;
  return absl::OkStatus();
}

Consistency ShardState::consistency() const {
  absl::ReaderMutexLock lock(&mu_);
  return job_.ps().consistency();
}

absl::Duration ShardState::rpc_timeout() const {
  absl::ReaderMutexLock lock(&mu_);
  return absl::Milliseconds(job_.ps().rpc_timeout_ms());
}

absl::Duration ShardState::pull_timeout() const {
  absl::ReaderMutexLock lock(&mu_);
  return absl::Milliseconds(job_.ps().rpc_timeout_ms()) +
         ShardRestartWindow(job_);
}

absl::Status ShardState::CheckInitHeaderLocked(const InitHeader& h) const {
  const std::string what = absl::StrCat("init from ", h.worker_id());
  if (h.world_size() < 1 || h.world_size() > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": world_size ", h.world_size(), " is outside [1, ",
                     kMaxWorldSize, "]"));
  }
  if (h.total_replicas() < h.world_size() ||
      h.total_replicas() > kMaxTotalReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": total_replicas ", h.total_replicas(),
                     " is outside [world_size ", h.world_size(), ", ",
                     kMaxTotalReplicas, "]"));
  }
  if (h.partitions().empty() && h.tables().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": no partitions and no sparse tables for shard ", shard_index_));
  }
  std::set<int32_t> ids;
  int64_t elements = 0;
  for (const Partition& p : h.partitions()) {
    if (p.shard() != shard_index_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": partition ", p.id(), " belongs to shard ",
                       p.shard(), ", not to this shard ", shard_index_));
    }
    if (p.count() < 1 || p.offset() < 0 || p.count() > kMaxShardElements ||
        p.offset() > kMaxShardElements * 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": partition ", p.id(), " has offset ", p.offset(),
                       " and count ", p.count()));
    }
    elements += p.count();
    if (elements > kMaxShardElements) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, ": the partitions add up to more than ", kMaxShardElements,
          " elements, the most one shard holds"));
    }
    if (!ids.insert(p.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": partition ", p.id(), " appears twice"));
    }
  }
  return CheckTablesLocked(h);
}

bool ShardState::SameLayoutLocked(const InitHeader& h) const {
  if (h.world_size() != world_size_ || h.total_replicas() != total_replicas_ ||
      h.partitions_size() != static_cast<int>(parts_.size())) {
    return false;
  }
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (!SamePartition(h.partitions(i), parts_[i].partition)) return false;
  }
  return SameTablesLocked(h);
}

absl::StatusOr<bool> ShardState::CheckInit(const InitHeader& header) const {
  absl::ReaderMutexLock lock(&mu_);
  if (shut_down_) return ShuttingDown();
  if (absl::Status s = AwaitingRestoreLocked("init"); !s.ok()) return s;
  if (!initialized_) {
    if (absl::Status s = CheckInitHeaderLocked(header); !s.ok()) return s;
    return false;
  }
  if (!SameLayoutLocked(header)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "init from ", header.worker_id(), ": shard ", shard_index_,
        " is already initialized with a different layout (", parts_.size(),
        " partitions, ", tables_.size(), " sparse tables, world_size ",
        world_size_, ", total_replicas ", total_replicas_, ")"));
  }
  return true;
}

absl::StatusOr<bool> ShardState::Init(const InitHeader& header,
                                      std::vector<std::vector<float>> values) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return ShuttingDown();
  if (absl::Status s = AwaitingRestoreLocked("init"); !s.ok()) return s;
  if (initialized_) {
    if (!SameLayoutLocked(header)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "init from ", header.worker_id(), ": shard ", shard_index_,
          " is already initialized with a different layout"));
    }
    return true;
  }
  if (absl::Status s = CheckInitHeaderLocked(header); !s.ok()) return s;
  if (values.size() != static_cast<size_t>(header.partitions_size())) {
    return absl::InvalidArgumentError("init: values do not match the layout");
  }
  std::vector<Part> parts;
  for (int i = 0; i < header.partitions_size(); ++i) {
    const Partition& p = header.partitions(i);
    if (static_cast<int64_t>(values[i].size()) != p.count()) {
      return absl::InvalidArgumentError(
          absl::StrCat("init: partition ", p.id(), " has ", values[i].size(),
                       " values, not ", p.count()));
    }
    Part part;
    part.partition = p;
    part.params = std::make_shared<std::vector<float>>(std::move(values[i]));
    part.optimizer =
        NewOptimizer(job_.optimizer(), p.count(), PartitionLayout(job_, p));
    parts.push_back(std::move(part));
  }
  ASSIGN_OR_RETURN(
      std::vector<std::unique_ptr<RowStore>> stores,
      MakeStoresLocked({header.tables().begin(), header.tables().end()}));
  parts_ = std::move(parts);
  SetTablesLocked(std::move(stores));
  world_size_ = header.world_size();
  total_replicas_ = header.total_replicas();
  clocks_.assign(world_size_, 0);
  initialized_ = true;
  changed_.SignalAll();
  // A shard that dies before its first interval can restart too.
  MaybeCaptureLocked(/*force=*/true);
  return false;
}

absl::Status ShardState::CheckPushLocked(const PushHeader& h) const {
  if (shut_down_) return ShuttingDown();
  const std::string what =
      absl::StrCat("push from rank ", h.rank(), " (", h.worker_id(), ")");
  if (absl::Status s = AwaitingRestoreLocked(what); !s.ok()) return s;
  if (!initialized_) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": shard ", shard_index_, " is not initialized yet (no Init)"));
  }
  if (h.rank() < 0 || h.rank() >= world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rank is outside [0, ", world_size_, ")"));
  }
  if (h.seq() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": seq is 0"));
  }
  if (h.clock() < 0 || h.clock() > kMaxClock) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": clock ", h.clock(), " is outside [0, ", kMaxClock, "]"));
  }
  if (h.based_on_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": based_on_version ", h.based_on_version(), " is negative"));
  }
  if (!std::isfinite(h.lr()) || h.lr() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": lr ", h.lr(), " is not a finite number >= 0"));
  }
  if (h.weight() < 1 || h.weight() > total_replicas_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": weight ", h.weight(), " is outside [1, ",
                     total_replicas_, "]"));
  }
  if (job_.ps().consistency() != SYNC &&
      (h.first_chunk() < 0 || h.first_chunk() > kMaxChunk)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": first_chunk ", h.first_chunk(),
                     " is outside [0, ", kMaxChunk, "]"));
  }
  return absl::OkStatus();
}

absl::Status ShardState::CheckChunksLocked(const PushHeader& h) const {
  const int64_t first = h.first_chunk();
  const int64_t end = first + h.weight();
  auto overlap = [&](int64_t a, int64_t b) {
    return absl::InvalidArgumentError(
        absl::StrCat("push from rank ", h.rank(), " (", h.worker_id(),
                     "): chunks [", first, ", ", end, ") overlap chunks [", a,
                     ", ", b, ") already applied (seq ", h.seq(), " is new)"));
  };
  // Below the watermark, only chunks forgiven after a restore may come.
  if (first < watermark_ && !ForgivenLocked(first, std::min(end, watermark_))) {
    return overlap(0, watermark_);
  }
  auto next = applied_ahead_.lower_bound(first);
  if (next != applied_ahead_.end() && next->first < end) {
    return overlap(next->first, next->second);
  }
  if (next != applied_ahead_.begin() && std::prev(next)->second > first) {
    return overlap(std::prev(next)->first, std::prev(next)->second);
  }
  return absl::OkStatus();
}

void ShardState::MarkChunksLocked(const PushHeader& h) {
  const int64_t first = h.first_chunk();
  const int64_t end = first + h.weight();
  if (first < watermark_) UnforgiveLocked(first, std::min(end, watermark_));
  if (end > watermark_) applied_ahead_[std::max(first, watermark_)] = end;
  for (auto it = applied_ahead_.begin();
       it != applied_ahead_.end() && it->first == watermark_;
       it = applied_ahead_.erase(it)) {
    watermark_ = it->second;
  }
}

absl::StatusOr<std::vector<Partition>> ShardState::CheckPush(
    const PushHeader& header) const {
  absl::ReaderMutexLock lock(&mu_);
  if (absl::Status s = CheckPushLocked(header); !s.ok()) return s;
  std::vector<Partition> layout;
  layout.reserve(parts_.size());
  for (const Part& p : parts_) layout.push_back(p.partition);
  return layout;
}

void ShardState::StepLocked(const std::vector<std::vector<float>>& grads,
                            const PushedRows& rows, double lr) {
  for (size_t i = 0; i < parts_.size(); ++i) {
    std::shared_ptr<std::vector<float>>& params = parts_[i].params;
    // A pull is still streaming this buffer: leave it to the pull.
    if (params.use_count() > 1) {
      params = std::make_shared<std::vector<float>>(*params);
    }
    parts_[i].optimizer->Step(absl::MakeSpan(*params),
                              absl::MakeConstSpan(grads[i]), lr);
  }
  StepTablesLocked(rows, lr);
  ++version_;
}

void ShardState::RecycleLocked(std::vector<std::vector<float>> buffers) {
  // Two sets cover a push being assembled while another is applied.
  if (staging_pool_.size() < 2) staging_pool_.push_back(std::move(buffers));
}

std::vector<std::vector<float>> ShardState::TakeStaging() {
  absl::MutexLock lock(&mu_);
  if (staging_pool_.empty()) return {};
  std::vector<std::vector<float>> b = std::move(staging_pool_.back());
  staging_pool_.pop_back();
  return b;
}

absl::Status ShardState::AccumulateLocked(
    const PushHeader& h, std::vector<std::vector<float>>& grads,
    const PushedRows& rows) {
  const std::string what = absl::StrCat("push from rank ", h.rank());
  if (h.clock() < next_sync_clock_) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": clock ", h.clock(), " was already applied (SYNC is at step ",
        next_sync_clock_, ")"));
  }
  auto found = pending_.find(h.clock());
  if (found != pending_.end()) {
    const Pending& p = found->second;
    if (p.ranks.count(h.rank())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": rank already pushed clock ", h.clock(),
                       " (seq ", h.seq(), " is new)"));
    }
    if (p.weight + h.weight() > total_replicas_) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": weights of clock ", h.clock(), " would sum to ",
          p.weight + h.weight(), ", above total_replicas ", total_replicas_));
    }
  }
  Pending& p = pending_[h.clock()];
  const float w = static_cast<float>(h.weight());
  AccumulateRowsLocked(p, rows, h.weight());
  if (p.ranks.empty()) {
    for (auto& g : grads) {
      if (h.weight() != 1) {
        for (float& x : g) x *= w;
      }
    }
    p.sum = std::move(grads);
    p.lr = h.lr();
  } else {
    for (size_t i = 0; i < grads.size(); ++i) {
      float* s = p.sum[i].data();
      const float* g = grads[i].data();
      const size_t n = grads[i].size();
      for (size_t k = 0; k < n; ++k) s[k] += w * g[k];
    }
    RecycleLocked(std::move(grads));
  }
  p.weight += h.weight();
  p.ranks.insert(h.rank());
  // The rank's clock counts before the step can be found complete.
  clocks_[h.rank()] = std::max(clocks_[h.rank()], h.clock() + 1);
  AdvanceSyncLocked();
  return absl::OkStatus();
}

// Steps complete in clock order: a worker cannot push t + 1 before t's step
// was applied (its pull of t + 1 waits for it). A step is complete when its
// weights sum to total_replicas; after a restore also when every rank's
// clock passed it, since a rank may have moved past a step whose push was
// lost (RecoverOnPullLocked): the step goes ahead with what arrived.
bool ShardState::AdvanceSyncLocked() {
  bool moved = false;
  while (true) {
    // Without a restore, clocks pass a step only by pushing it.
    const int64_t min = restored_ ? MinClockLocked() : next_sync_clock_;
    auto it = pending_.begin();
    const bool pushed = it != pending_.end() && it->first == next_sync_clock_;
    if (pushed &&
        (it->second.weight >= total_replicas_ || min > next_sync_clock_)) {
      const float inv = 1.0f / static_cast<float>(it->second.weight);
      for (auto& g : it->second.sum) {
        for (float& x : g) x *= inv;
      }
      StepLocked(it->second.sum, AveragedRowsLocked(it->second, inv),
                 it->second.lr);
      RecycleLocked(std::move(it->second.sum));
      pending_.erase(it);
      ++next_sync_clock_;
    } else if (!pushed && min > next_sync_clock_) {
      // Every rank is past these steps and none of their pushes is here:
      // all were lost with a crash.
      next_sync_clock_ = it == pending_.end() ? min : std::min(min, it->first);
    } else {
      return moved;
    }
    moved = true;
  }
}

absl::StatusOr<PushResponse> ShardState::ApplyPush(
    const PushHeader& h, std::vector<std::vector<float>> grads,
    PushedRows rows) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckPushLocked(h); !s.ok()) return s;
  if (grads.size() != parts_.size()) {
    return absl::InvalidArgumentError("push: gradients do not match layout");
  }
  int64_t bytes = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (static_cast<int64_t>(grads[i].size()) != parts_[i].partition.count()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: partition ", parts_[i].partition.id(), " gradient has ",
          grads[i].size(), " elements, not ", parts_[i].partition.count()));
    }
    bytes += grads[i].size() * 4;
  }
  RETURN_IF_ERROR(SortPushedRowsLocked(h, rows));
  bytes += rows.bytes();
  PushResponse response;
  auto last = last_seq_.find(h.worker_id());
  if (last != last_seq_.end() && h.seq() <= last->second) {
    ++duplicates_;
    response.set_duplicate(true);
    response.set_version(version_);
    return response;
  }
  const int64_t version_before = version_;
  if (job_.ps().consistency() == SYNC && restored_ &&
      h.clock() < next_sync_clock_) {
    // A step the restore skipped (every rank was past it): its push was
    // taken by the dead shard and lost with it.
    ++duplicates_;
    last_seq_[h.worker_id()] = h.seq();
    response.set_duplicate(true);
    response.set_version(version_);
    return response;
  }
  if (job_.ps().consistency() == SYNC) {
    if (absl::Status s = AccumulateLocked(h, grads, rows); !s.ok()) return s;
    ++staleness_[0];
  } else {
    if (absl::Status s = CheckChunksLocked(h); !s.ok()) return s;
    if (recovering_) {
      ForgiveBelowLocked(h.first_chunk());
      // A rank's second push since the restore is of chunks claimed after
      // the crash, above every lost one: all of them are forgiven now.
      if (++pushes_since_restore_[h.rank()] >= 2) recovering_ = false;
    }
    MarkChunksLocked(h);
    // A push of w chunks is w / total_replicas of a step (as in SYNC, which
    // averages them): applying every worker's push with the full rate
    // would take total_replicas / w times larger steps per sample than the
    // other modes at the same spec.
    StepLocked(grads, rows, h.lr() * h.weight() / total_replicas_);
    RecycleLocked(std::move(grads));
    const int64_t lag =
        std::max<int64_t>(0, version_before - h.based_on_version());
    ++staleness_[std::min<int64_t>(lag / world_size_, kStalenessBuckets - 1)];
  }
  last_seq_[h.worker_id()] = h.seq();
  clocks_[h.rank()] = std::max(clocks_[h.rank()], h.clock() + 1);
  ++pushes_;
  ++window_pushes_;
  bytes_pushed_ += bytes;
  rows_pushed_ += rows.rows();
  changed_.SignalAll();
  response.set_version(version_);
  MaybeCaptureLocked(/*force=*/false);
  return response;
}

void ShardState::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  changed_.SignalAll();
}

}  // namespace cohort
