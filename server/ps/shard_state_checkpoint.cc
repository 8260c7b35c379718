// ShardState's checkpoint captures, restore and the recovery after it (the
// header comment of shard_state.h says what they mean).
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_limits.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace {

// Ranges [first, end) sorted, disjoint, non-empty and inside [lo, hi].
absl::Status CheckRanges(const std::map<int64_t, int64_t>& ranges, int64_t lo,
                         int64_t hi, const char* what) {
  int64_t next = lo;
  for (const auto& [first, end] : ranges) {
    if (first < next || end <= first || end > hi) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard checkpoint: ", what, " range [", first, ", ", end,
          ") is empty, overlaps another or lies outside [", lo, ", ", hi, "]"));
    }
    next = end;
  }
  return absl::OkStatus();
}

absl::Status BadCapture(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("shard checkpoint: ", what));
}

// Each partition's parameters and optimizer state have the sizes the job's
// optimizer gives a partition of its size: Restore copies into buffers of
// those sizes and trusts these checks.
absl::Status CheckCaptureTensors(const ShardState::Capture& c,
                                 const OptimizerSpec& optimizer) {
  if (c.params.size() != c.partitions.size() ||
      c.optimizer_state.size() != c.partitions.size()) {
    return BadCapture("tensors do not match the partitions");
  }
  for (size_t i = 0; i < c.partitions.size(); ++i) {
    const Partition& p = c.partitions[i];
    if (c.params[i] == nullptr ||
        static_cast<int64_t>(c.params[i]->size()) != p.count()) {
      return BadCapture(absl::StrCat(
          "partition ", p.id(), " parameters are not ", p.count(), " values"));
    }
    const std::unique_ptr<UpdateRule<float>> probe =
        ShardState::NewOptimizer(optimizer, p.count());
    const std::vector<Tensor*> state = probe->State();
    if (c.optimizer_state[i].size() != state.size()) {
      return BadCapture(absl::StrCat(
          "partition ", p.id(), " has ", c.optimizer_state[i].size(),
          " optimizer tensors, the job's optimizer ", state.size()));
    }
    for (size_t k = 0; k < state.size(); ++k) {
      if (static_cast<int64_t>(c.optimizer_state[i][k].size()) !=
          state[k]->size()) {
        return BadCapture(absl::StrCat(
            "partition ", p.id(), " optimizer tensor ", k, " has ",
            c.optimizer_state[i][k].size(), " values, not ", state[k]->size()));
      }
    }
  }
  return absl::OkStatus();
}

// Clocks, version, watermark, chunk ranges and seqs are within the limits a
// live shard keeps them in.
absl::Status CheckCaptureProgress(const ShardState::Capture& c) {
  if (static_cast<int32_t>(c.clocks.size()) != c.world_size) {
    return BadCapture(
        absl::StrCat(c.clocks.size(), " clocks for world_size ", c.world_size));
  }
  for (int64_t clock : c.clocks) {
    if (clock < 0 || clock > kMaxClock) {
      return BadCapture(
          absl::StrCat("clock ", clock, " is outside [0, ", kMaxClock, "]"));
    }
  }
  if (c.version < 0 || c.next_sync_clock < 0 || c.next_sync_clock > kMaxClock ||
      c.watermark < 0 || c.watermark > kMaxChunk) {
    return BadCapture(absl::StrCat("version ", c.version, ", next_sync_clock ",
                                   c.next_sync_clock, " or watermark ",
                                   c.watermark, " out of range"));
  }
  // Ranges above the watermark would have been merged into it.
  if (absl::Status s = CheckRanges(c.applied_ahead, c.watermark + 1, kMaxChunk,
                                   "applied chunk");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRanges(c.forgiven, 0, c.watermark, "forgiven");
      !s.ok()) {
    return s;
  }
  for (const auto& [worker, seq] : c.last_seq) {
    if (seq == 0) return BadCapture(absl::StrCat("seq 0 for worker ", worker));
  }
  return absl::OkStatus();
}

}  // namespace

void ShardState::EnableCheckpoints(int64_t every_steps, absl::Duration every) {
  absl::MutexLock lock(&mu_);
  checkpoints_ = true;
  checkpoint_every_steps_ = std::max<int64_t>(0, every_steps);
  checkpoint_every_ = std::max(absl::ZeroDuration(), every);
  last_capture_time_ = absl::Now();
  // Init came first (a quick worker): it gets its capture now. A restored
  // state is on disk already.
  if (initialized_ && !restored_) MaybeCaptureLocked(/*force=*/true);
}

ShardState::Capture ShardState::CaptureLocked() const {
  Capture c;
  c.shard_index = shard_index_;
  c.consistency = job_.ps().consistency();
  c.world_size = world_size_;
  c.total_replicas = total_replicas_;
  c.version = version_;
  for (const Part& p : parts_) {
    c.partitions.push_back(p.partition);
    c.params.push_back(p.params);
    std::vector<std::vector<float>> state;
    for (const Tensor* t : p.optimizer->State()) {
      state.emplace_back(t->data(), t->data() + t->size());
    }
    c.optimizer_state.push_back(std::move(state));
  }
  c.clocks = clocks_;
  c.next_sync_clock = next_sync_clock_;
  c.watermark = watermark_;
  c.applied_ahead = applied_ahead_;
  c.forgiven = forgiven_;
  c.last_seq.insert(last_seq_.begin(), last_seq_.end());
  for (const auto& t : tables_) {
    c.tables.push_back(t->table());
    c.rows.push_back(t->Capture());
  }
  return c;
}

void ShardState::MaybeCaptureLocked(bool force) {
  // One capture at a time: while the writer is busy, a due capture waits
  // until it is done. A partly pushed SYNC step is never captured (its
  // seqs would be recorded without its gradients): the step's last push
  // takes it.
  if (!checkpoints_ || !initialized_ || shut_down_ || writer_busy_ ||
      capture_.has_value() || !pending_.empty()) {
    return;
  }
  const absl::Time now = absl::Now();
  const bool due =
      force ||
      (checkpoint_every_steps_ > 0 &&
       version_ - last_capture_version_ >= checkpoint_every_steps_) ||
      (checkpoint_every_ > absl::ZeroDuration() &&
       version_ > last_capture_version_ &&
       now - last_capture_time_ >= checkpoint_every_);
  if (!due) return;
  capture_ = CaptureLocked();
  last_capture_version_ = version_;
  last_capture_time_ = now;
}

absl::StatusOr<ShardState::Capture> ShardState::NextCapture() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shut_down_ || capture_.has_value();
  };
  mu_.Await(absl::Condition(&ready));
  if (shut_down_) return absl::UnavailableError("shard shutting down");
  Capture c = *std::move(capture_);
  capture_.reset();
  writer_busy_ = true;
  return c;
}

void ShardState::CaptureDone(int64_t version, bool written) {
  absl::MutexLock lock(&mu_);
  writer_busy_ = false;
  if (written) checkpoint_version_ = std::max(checkpoint_version_, version);
  // One that fell due during the write goes now, not at the next update
  // (which may be long in coming).
  MaybeCaptureLocked(/*force=*/false);
}

absl::StatusOr<ShardState::Capture> ShardState::CaptureNow() {
  absl::ReaderMutexLock lock(&mu_);
  if (!initialized_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", shard_index_, " has no state to capture yet (no Init)"));
  }
  if (!pending_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_index_, ": SYNC step ",
                     pending_.begin()->first, " is partly pushed"));
  }
  return CaptureLocked();
}

absl::Status ShardState::CheckCaptureLocked(const Capture& c) const {
  if (c.shard_index != shard_index_) {
    return BadCapture(absl::StrCat("it is of shard ", c.shard_index,
                                   ", this is shard ", shard_index_));
  }
  if (c.consistency != job_.ps().consistency()) {
    return BadCapture(absl::StrCat(
        "it was written in ", Consistency_Name(c.consistency), ", the job is ",
        Consistency_Name(job_.ps().consistency())));
  }
  // The layout passes the same checks as an Init's.
  InitHeader h;
  h.set_worker_id("checkpoint");
  h.set_world_size(c.world_size);
  h.set_total_replicas(c.total_replicas);
  for (const Partition& p : c.partitions) *h.add_partitions() = p;
  for (const SparseTableInfo& t : c.tables) *h.add_tables() = t;
  if (absl::Status s = CheckInitHeaderLocked(h); !s.ok()) {
    return BadCapture(std::string(s.message()));
  }
  if (absl::Status s = CheckCaptureTensors(c, job_.optimizer()); !s.ok()) {
    return s;
  }
  return CheckCaptureProgress(c);
}

void ShardState::ExpectRestore() {
  absl::MutexLock lock(&mu_);
  if (!initialized_) awaiting_restore_ = true;
}

absl::Status ShardState::AwaitingRestoreLocked(absl::string_view what) const {
  if (!awaiting_restore_ || initialized_) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(what, ": shard ", shard_index_,
                   " is a replacement still restoring its checkpoint; retry"));
}

absl::Status ShardState::Restore(const Capture& c) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("shard shutting down");
  if (initialized_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", shard_index_, " is already initialized; cannot restore"));
  }
  if (absl::Status s = CheckCaptureLocked(c); !s.ok()) return s;
  absl::StatusOr<std::vector<std::unique_ptr<RowStore>>> stores =
      RestoreStoresLocked(c);
  if (!stores.ok()) return stores.status();
  std::vector<Part> parts;
  for (size_t i = 0; i < c.partitions.size(); ++i) {
    Part part;
    part.partition = c.partitions[i];
    part.params = std::make_shared<std::vector<float>>(*c.params[i]);
    part.optimizer = NewOptimizer(job_.optimizer(), c.partitions[i].count(),
                                  PartitionLayout(job_, c.partitions[i]));
    const std::vector<Tensor*> state = part.optimizer->State();
    for (size_t k = 0; k < state.size(); ++k) {
      std::copy(c.optimizer_state[i][k].begin(), c.optimizer_state[i][k].end(),
                state[k]->data());
    }
    parts.push_back(std::move(part));
  }
  parts_ = std::move(parts);
  SetTablesLocked(*std::move(stores));
  world_size_ = c.world_size;
  total_replicas_ = c.total_replicas;
  version_ = c.version;
  clocks_ = c.clocks;
  next_sync_clock_ = c.next_sync_clock;
  watermark_ = c.watermark;
  applied_ahead_ = c.applied_ahead;
  forgiven_ = c.forgiven;
  last_seq_.clear();
  last_seq_.insert(c.last_seq.begin(), c.last_seq.end());
  pending_.clear();
  awaiting_restore_ = false;
  restored_ = true;
  restored_version_ = c.version;
  recovering_ = c.consistency != SYNC;
  pushes_since_restore_.assign(world_size_, 0);
  last_capture_version_ = c.version;
  last_capture_time_ = absl::Now();
  checkpoint_version_ = c.version;
  initialized_ = true;
  changed_.SignalAll();
  return absl::OkStatus();
}

void ShardState::RaiseSyncClocks(int64_t clock) {
  absl::MutexLock lock(&mu_);
  if (!restored_ || job_.ps().consistency() != SYNC || clock <= 0 ||
      clock > kMaxClock) {
    return;
  }
  bool raised = false;
  for (int64_t& c : clocks_) {
    if (c < clock) {
      c = clock;
      raised = true;
    }
  }
  if (raised && AdvanceSyncLocked()) {
    changed_.SignalAll();
    MaybeCaptureLocked(/*force=*/false);
  }
}

void ShardState::RecoverOnPullLocked(int32_t rank, int64_t clock) {
  if (clock < 0 || clock > kMaxClock) return;  // refused by the caller
  bool moved = false;
  if (job_.ps().consistency() == SYNC) {
    // The rank pushed every step below `clock`; those lost with the crash
    // are not coming again.
    if (clock > clocks_[rank]) {
      clocks_[rank] = clock;
      moved = AdvanceSyncLocked();
    }
  } else if (recovering_) {
    const int64_t before = watermark_;
    ForgiveBelowLocked(clock * total_replicas_);
    moved = watermark_ != before;
  }
  if (moved) {
    changed_.SignalAll();
    MaybeCaptureLocked(/*force=*/false);
  }
}

void ShardState::ForgiveBelowLocked(int64_t limit) {
  if (limit <= watermark_) return;
  auto forgive = [this](int64_t first,
                        int64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (first >= end) return;
    // Every forgiven range lies below the watermark, so a new one can only
    // continue the last.
    if (!forgiven_.empty() && forgiven_.rbegin()->second == first) {
      forgiven_.rbegin()->second = end;
    } else {
      forgiven_[first] = end;
    }
  };
  int64_t pos = watermark_;
  auto it = applied_ahead_.begin();
  while (it != applied_ahead_.end() && it->first < limit) {
    forgive(pos, it->first);
    pos = std::max(pos, it->second);
    it = applied_ahead_.erase(it);
  }
  if (pos < limit) {
    forgive(pos, limit);
    pos = limit;
  }
  watermark_ = pos;
  for (it = applied_ahead_.begin();
       it != applied_ahead_.end() && it->first == watermark_;
       it = applied_ahead_.erase(it)) {
    watermark_ = it->second;
  }
}

bool ShardState::ForgivenLocked(int64_t first, int64_t end) const {
  auto it = forgiven_.upper_bound(first);
  if (it == forgiven_.begin()) return false;
  --it;
  return it->first <= first && it->second >= end;
}

void ShardState::UnforgiveLocked(int64_t first, int64_t end) {
  auto it = forgiven_.upper_bound(first);
  if (it == forgiven_.begin()) return;
  --it;
  const int64_t lo = it->first;
  const int64_t hi = it->second;
  if (lo > first || hi < end) return;  // not forgiven (CheckChunksLocked)
  forgiven_.erase(it);
  if (lo < first) forgiven_[lo] = first;
  if (end < hi) forgiven_[end] = hi;
}

}  // namespace cohort
