// The state of one parameter-server shard, without any RPC: its partitions'
// parameters and optimizers, the workers' clocks, push deduplication, the
// consistency model's waits and the statistics the shard reports.
//
// The gRPC service (shard_server.h) assembles every Init and Push into a
// staging buffer with ChunkAssembler first and hands the whole of it here,
// so a malformed request is refused before anything changes.
//
// Thread safety: ShardState is thread-safe; one mutex guards everything and
// WaitForPull blocks only its caller (on a condition variable). ChunkAssembler
// is thread-compatible (one per request).
#ifndef COHORT_SERVER_PS_SHARD_STATE_H_
#define COHORT_SERVER_PS_SHARD_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"
#include "worker/optim/optimizer.h"

namespace cohort {

// Buckets of ShardStats.staleness_histogram: 0..7 and ">= 8".
inline constexpr int kStalenessBuckets = 9;

// Collects the chunks of one request into one float buffer per partition,
// checking each chunk against the layout and, at Finish, that every element
// was covered exactly once.
class ChunkAssembler {
 public:
  // `partitions` is the request's layout; `what` starts every error message
  // (e.g. "push from rank 2"). `buffers`, when given one per partition, are
  // reused as the staging buffers (ShardState::TakeStaging): fresh 64 MiB
  // buffers cost more in page faults than the copy into them.
  ChunkAssembler(const std::vector<Partition>& partitions, std::string what,
                 std::vector<std::vector<float>> buffers = {});

  // INVALID_ARGUMENT for an unknown partition, a size that is not a multiple
  // of 4, or a chunk outside its partition; RESOURCE_EXHAUSTED for a chunk
  // above kMaxChunkBytes. `data` is copied.
  absl::Status Add(const TensorChunk& chunk);

  // The values, in the order of the layout; INVALID_ARGUMENT naming the
  // first element covered twice or not covered.
  absl::StatusOr<std::vector<std::vector<float>>> Finish();

  int64_t bytes() const { return bytes_; }

 private:
  struct Slot {
    Partition partition;
    std::vector<float> values;
    std::vector<std::pair<int64_t, int64_t>> covered;  // [offset, end)
  };
  std::string what_;
  std::vector<Slot> slots_;
  absl::flat_hash_map<int32_t, size_t> index_;  // partition id -> slot
  int64_t bytes_ = 0;
};

class ShardState {
 public:
  // What a pull returns: a consistent, immutable view of every partition.
  // Parameters are copy-on-write: a pull shares the current buffers, and an
  // update that finds a buffer still shared copies it first, so a pull
  // never copies 64 MiB under the lock and never sees a half-applied step.
  struct Snapshot {
    int64_t version = 0;
    int64_t min_clock = 0;
    std::vector<Partition> partitions;
    std::vector<std::shared_ptr<const std::vector<float>>> values;
  };

  // `job` must carry the optimizer and PS settings; zero PS fields get their
  // documented defaults. `shard_index` is this shard's index in the plan.
  ShardState(const JobSpec& job, int shard_index);
  ShardState(const ShardState&) = delete;
  ShardState& operator=(const ShardState&) = delete;

  // Replaces the job and index (a shard process learns them only when it
  // registers). FAILED_PRECONDITION once initialized.
  absl::Status Configure(const JobSpec& job, int shard_index);

  // Checks an Init header. true: already initialized with this layout (the
  // values can be skipped); false: the values are needed.
  // FAILED_PRECONDITION for a different layout, INVALID_ARGUMENT for a bad
  // header.
  absl::StatusOr<bool> CheckInit(const InitHeader& header) const;
  // Initializes with `values` (one buffer per header partition, assembled by
  // a ChunkAssembler over header.partitions()). Returns whether it already
  // was (then the values are ignored).
  absl::StatusOr<bool> Init(const InitHeader& header,
                            std::vector<std::vector<float>> values);

  // This shard's layout, for assembling a push. FAILED_PRECONDITION before
  // Init; INVALID_ARGUMENT for a bad header (rank, seq, clock, lr, weight).
  absl::StatusOr<std::vector<Partition>> CheckPush(
      const PushHeader& header) const;
  // Applies (or, for SYNC, accumulates) a push assembled over CheckPush's
  // layout. A seq not above the worker's last is acknowledged as a
  // duplicate and changes nothing but the duplicate count.
  absl::StatusOr<PushResponse> ApplyPush(const PushHeader& header,
                                         std::vector<std::vector<float>> grads);

  // Staging buffers for a push over CheckPush's layout, recycled from
  // earlier pushes when possible (contents undefined).
  std::vector<std::vector<float>> TakeStaging();

  // Waits (until `deadline`) for Init and for the consistency model to allow
  // `clock`, then copies the parameters. DEADLINE_EXCEEDED names the slowest
  // ranks; UNAVAILABLE after Shutdown.
  absl::StatusOr<Snapshot> WaitForPull(int32_t rank, int64_t clock,
                                       absl::Time deadline);

  // Statistics; TakeStats also starts a new rate window.
  ShardStats Stats() const;
  ShardStats TakeStats();

  // Wakes every waiting pull with UNAVAILABLE("shard shutting down"); later
  // calls fail the same way.
  void Shutdown();

  // Job settings with defaults filled.
  Consistency consistency() const;
  absl::Duration rpc_timeout() const;

 private:
  struct Part {
    Partition partition;
    std::shared_ptr<std::vector<float>> params;  // copy-on-write
    std::unique_ptr<Optimizer<float>> optimizer;
  };
  // SYNC: one step's gradients so far.
  struct Pending {
    std::vector<std::vector<float>> sum;
    int64_t weight = 0;
    double lr = 0;
    std::set<int32_t> ranks;
  };

  absl::Status CheckInitHeaderLocked(const InitHeader& header) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool SameLayoutLocked(const InitHeader& header) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CheckPushLocked(const PushHeader& header) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status AccumulateLocked(const PushHeader& h,
                                std::vector<std::vector<float>>& grads)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepLocked(const std::vector<std::vector<float>>& grads, double lr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecycleLocked(std::vector<std::vector<float>> buffers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SSP and ASYNC: INVALID_ARGUMENT if a pushed chunk was applied before;
  // then records the push's chunks and advances watermark_.
  absl::Status CheckChunksLocked(const PushHeader& h) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void MarkChunksLocked(const PushHeader& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t MinClockLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool PullReadyLocked(int64_t clock) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::string SlowestLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  ShardStats StatsLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // clocks advanced, initialized, or shut down
  JobSpec job_ ABSL_GUARDED_BY(mu_);
  int shard_index_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  int32_t world_size_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t total_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> clocks_ ABSL_GUARDED_BY(mu_);  // per rank (SYNC)
  // SSP and ASYNC: every chunk below watermark_ is applied, and the ranges
  // [first, end) above it that are applied too.
  int64_t watermark_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, int64_t> applied_ahead_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> last_seq_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);  // SYNC, by clock
  int64_t next_sync_clock_ ABSL_GUARDED_BY(mu_) = 0;  // SYNC: steps applied
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<std::vector<float>>> staging_pool_
      ABSL_GUARDED_BY(mu_);
  // Statistics, cumulative.
  int64_t pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_pulled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> staleness_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_ ABSL_GUARDED_BY(mu_);
  // The current rate window.
  absl::Time window_start_ ABSL_GUARDED_BY(mu_);
  int64_t window_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t window_pulls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_STATE_H_
