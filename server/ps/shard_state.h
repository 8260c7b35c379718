// The state of one parameter-server shard, without any RPC: its partitions'
// parameters and optimizers, the rows it owns of the sparse tables
// (row_store.h), the workers' clocks, push deduplication, the consistency
// model's waits and the statistics the shard reports.
//
// The gRPC service (shard_server.h) assembles every Init and Push into a
// staging buffer with ChunkAssembler (and a push's rows with RowAssembler,
// shard_rows.h) first and hands the whole of it here, so a malformed
// request is refused before anything changes.
//
// Sparse tables (InitHeader.tables) are stepped with the job's optimizer in
// its row-wise form (kernels/sparse_update_rules.h): SYNC sums a step's
// rows with the pushes' weights as it sums the dense gradient, averages
// them when the step is complete and steps each table's rows in ascending
// order; SSP and ASYNC step a push's rows at once, at the dense part's
// lr * weight / total_replicas. Every table's rule counts every applied
// update, rows or none, so that Adagrad's lr_decay and Adam's bias
// correction stay in step with the dense rules. A shard may hold tables and
// no partitions (then a pull returns the header only).
//
// Checkpoints and restore (shard_checkpoint.h does the files): with a
// checkpoint policy set, the state is captured right after Init and then
// after the update that makes one due, under the lock but without copying
// the parameters (they are copy-on-write, as for pulls; only the optimizer
// state is copied), and handed to the writer thread (NextCapture), which
// writes it outside the lock. A SYNC capture is always taken between steps
// (no step half pushed), so the capture is exactly the shard after
// `version` updates. The sparse tables' stored rows are not copy-on-write:
// a capture copies every stored row and its rule state under the lock, a
// cost that grows with the rows held (for Adagrad, 8 * dim bytes a row).
//
// After a restore (a replacement shard started from the dead one's newest
// checkpoint), the updates the dead shard applied after that checkpoint
// are lost: at most one checkpoint interval of them, plus those applied
// while a slow disk still wrote the previous checkpoint. The workers are
// ahead of the restored state, and the shard catches up with them instead
// of waiting for pushes that will never come again:
//   - Deduplication uses the restored seq table: a retried push applied
//     before the checkpoint is acknowledged as a duplicate, one applied
//     after it (lost) is applied again.
//   - SYNC: a pull for clock c from rank r tells that r pushed every step
//     below c. A step is applied once every rank pushed it or moved past
//     it, with the gradients that arrived (averaged over their weight); a
//     step nobody pushes again (all of it lost) is skipped. So the steps
//     in flight at the crash complete with the pushes retried or made
//     after the restore, and the clock fast-forwards to the workers'.
//     The coordinator also tells a clock below which every rank pushed
//     every step (RaiseSyncClocks): at the restore, the dead shard's last
//     reported min_clock, and with every heartbeat the most steps any
//     worker reported. A worker that moved on to an evaluation, which
//     waits for the others, pulls no more, but it reported its step
//     first: the steps the dead shard applied after its last heartbeat are
//     not waited for either.
//   - SSP and ASYNC: chunks acknowledged after the checkpoint are lost and
//     nobody pushes them again. Until some rank makes its second push
//     since the restore (necessarily of chunks claimed after the crash,
//     above every lost one), each push forgives the chunks below its first
//     chunk that are not applied, and each pull those below its round;
//     forgiven chunks count as done for SSP's wait, and a forgiven chunk
//     that is still pushed (a push in flight at the crash) is applied once.
//     A pull during that recovery therefore never waits, and afterwards
//     only chunks that are really coming are waited for.
// Nothing is accepted that would not be accepted without the crash: pushes
// are checked as always, and no gradient is applied twice.
// Until its restore is done, a replacement answers UNAVAILABLE, which
// workers retry (ExpectRestore). In a job whose shards restart, a pull
// waits for slow ranks up to rpc_timeout plus the restart window
// (client/restart_window.h): a rank may be stalled by another shard's
// restart.
//
// Thread safety: ShardState is thread-safe; one mutex guards everything and
// WaitForPull and NextCapture block only their caller. ChunkAssembler is
// thread-compatible (one per request).
#ifndef COHORT_SERVER_PS_SHARD_STATE_H_
#define COHORT_SERVER_PS_SHARD_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/update_rules.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"
#include "server/ps/row_store.h"
#include "server/ps/shard_rows.h"

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
  // The server-side optimizer of one partition of `count` parameters: the
  // update rule (kernels/update_rules.h) that `spec` describes, as the
  // workers' engines make it, over `layout` (PartitionLayout). LAMB and
  // LARS are refused in PS mode by the spec check (a partition may hold a
  // piece of a tensor); here they would take norms over the partition.
  static std::unique_ptr<UpdateRule<float>> NewOptimizer(
      const OptimizerSpec& spec, int64_t count, const RuleLayout& layout = {});

  // Partition `p`'s tensors in the job's flat buffer, with decay off on
  // biases and norm parameters under optimizer.no_decay_bias_and_norm
  // (common/model_sizes.h): empty (one tensor with decay) otherwise.
  static RuleLayout PartitionLayout(const JobSpec& job, const Partition& p);

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

  // What PullRows returns: the rows asked for, copied under the lock, per
  // table in the request's order and ids in the request's order.
  struct RowsSnapshot {
    int64_t version = 0;
    int64_t min_clock = 0;
    struct Table {
      int32_t table = 0;
      int32_t dim = 0;
      std::vector<int64_t> ids;
      std::vector<float> values;  // {ids.size(), dim}
    };
    std::vector<Table> tables;
  };

  // What a checkpoint holds: the shard between two updates. Parameters are
  // shared with the live state (copy-on-write: never written while shared);
  // the rest is copied.
  struct Capture {
    int shard_index = 0;
    Consistency consistency = SYNC;
    int32_t world_size = 0;
    int32_t total_replicas = 0;
    int64_t version = 0;
    std::vector<Partition> partitions;
    std::vector<std::shared_ptr<const std::vector<float>>> params;
    // Per partition, its optimizer's state tensors (UpdateRule::State()).
    std::vector<std::vector<std::vector<float>>> optimizer_state;
    std::vector<int64_t> clocks;  // per rank
    int64_t next_sync_clock = 0;
    int64_t watermark = 0;
    std::map<int64_t, int64_t> applied_ahead;  // [first, end)
    std::map<int64_t, int64_t> forgiven;       // [first, end)
    std::map<std::string, uint64_t> last_seq;
    // The sparse tables, and per table its stored rows (copied).
    std::vector<SparseTableInfo> tables;
    std::vector<RowStore::Contents> rows;
  };

  // `job` must carry the optimizer and PS settings; zero PS fields get their
  // documented defaults. `shard_index` is this shard's index in the plan.
  ShardState(const JobSpec& job, int shard_index);
  ShardState(const ShardState&) = delete;
  ShardState& operator=(const ShardState&) = delete;

  // Replaces the job and index (a shard process learns them only when it
  // registers). FAILED_PRECONDITION once initialized.
  absl::Status Configure(const JobSpec& job, int shard_index);

  // Checks an Init header. true: already initialized with this layout and
  // these sparse tables (the values can be skipped); false: the values are
  // needed. FAILED_PRECONDITION for a different layout or tables,
  // INVALID_ARGUMENT for a bad header (tables included, and an optimizer
  // without a row-wise form when there are tables).
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
  // The sparse tables and this shard's place among the shards, for a
  // RowAssembler (no tables before Init).
  SparseLayout sparse_layout() const;
  // Applies (or, for SYNC, accumulates) a push assembled over CheckPush's
  // layout, with its rows (a RowAssembler's, checked again here).
  // A seq not above the worker's last is acknowledged as a duplicate and
  // changes nothing but the duplicate count. INVALID_ARGUMENT, changing
  // nothing, naming the rank, table and row for a bad row.
  absl::StatusOr<PushResponse> ApplyPush(const PushHeader& header,
                                         std::vector<std::vector<float>> grads,
                                         PushedRows rows = {});

  // Staging buffers for a push over CheckPush's layout, recycled from
  // earlier pushes when possible (contents undefined).
  std::vector<std::vector<float>> TakeStaging();

  // Waits (until `deadline`) for Init and for the consistency model to allow
  // `clock`, then copies the parameters. DEADLINE_EXCEEDED names the slowest
  // ranks; UNAVAILABLE after Shutdown.
  absl::StatusOr<Snapshot> WaitForPull(int32_t rank, int64_t clock,
                                       absl::Time deadline);
  // The rows `request` names, after WaitForPull's wait, with the same
  // errors; INVALID_ARGUMENT naming the table and row for an unknown table,
  // a row outside its table or owned by another shard, or data in the
  // request. A row never stored reads as its initial value and stays not
  // stored.
  absl::StatusOr<RowsSnapshot> PullRows(const PullRowsRequest& request,
                                        absl::Time deadline);

  // Statistics; TakeStats also starts a new rate window. Bytes pushed and
  // pulled count a row as 8 bytes of id and 4 a value, beside the dense
  // parts' 4 a value.
  ShardStats Stats() const;
  ShardStats TakeStats();

  // Wakes every waiting pull with UNAVAILABLE("shard shutting down"); later
  // calls fail the same way.
  void Shutdown();

  // Checkpoint policy: a capture is due after Init, then after an update
  // once `every_steps` updates (0: never by updates) or `every` (zero:
  // never by time) have passed since the last capture.
  void EnableCheckpoints(int64_t every_steps, absl::Duration every);
  // Blocks until a capture is due and hands it over; no other capture is
  // taken until CaptureDone. UNAVAILABLE after Shutdown.
  absl::StatusOr<Capture> NextCapture();
  // The writer is done with the last capture (of `version`); `written`
  // says whether it reached the disk.
  void CaptureDone(int64_t version, bool written);
  // The state now. FAILED_PRECONDITION before Init, and in SYNC while a
  // step is partly pushed.
  absl::StatusOr<Capture> CaptureNow();
  // A replacement that will Restore: until then Init, Push and Pull are
  // answered UNAVAILABLE ("restoring"), which clients retry, instead of
  // being refused (no Init yet) or held.
  void ExpectRestore();
  // Takes the state of `c` (a checkpoint of this shard, already checked
  // against the job's layout by the caller) and enters recovery (the
  // header comment). FAILED_PRECONDITION once initialized; INVALID_ARGUMENT
  // naming the field when `c` is inconsistent (sizes, ranges, shard index,
  // consistency model).
  absl::Status Restore(const Capture& c);
  // SYNC, after Restore: every rank had pushed every step below `clock`
  // (the header comment), so steps below it that the checkpoint lacks are
  // skipped now, and late pushes of them are acknowledged as duplicates.
  // Anything else: no effect.
  void RaiseSyncClocks(int64_t clock);

  // Job settings with defaults filled.
  Consistency consistency() const;
  absl::Duration rpc_timeout() const;
  // How long a pull may wait for slow ranks: rpc_timeout, plus the restart
  // window in a job whose shards restart (client/restart_window.h), since a
  // rank may be stalled by another shard's restart.
  absl::Duration pull_timeout() const;

 private:
  struct Part {
    Partition partition;
    std::shared_ptr<std::vector<float>> params;  // copy-on-write
    std::unique_ptr<UpdateRule<float>> optimizer;
  };
  // SYNC: one table's row gradients of one step so far, in the order the
  // rows first came.
  struct PendingRows {
    absl::flat_hash_map<int64_t, int64_t> index;  // row id -> position
    std::vector<int64_t> ids;
    std::vector<float> sum;  // {ids.size(), dim}
  };
  // SYNC: one step's gradients so far.
  struct Pending {
    std::vector<std::vector<float>> sum;
    std::vector<PendingRows> rows;  // per table
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
                                std::vector<std::vector<float>>& grads,
                                const PushedRows& rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WaitForPull's checks and wait, shared with PullRows: OK once `clock`
  // may be read; `what` starts every error message.
  absl::Status WaitReadyLocked(int32_t rank, int64_t clock, absl::Time deadline,
                               const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sparse tables (shard_state_rows.cc).
  int NumShardsLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CheckTablesLocked(const InitHeader& h) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool SameTablesLocked(const InitHeader& h) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Empty stores for `tables` (already checked); INVALID_ARGUMENT when the
  // job's optimizer has no row-wise form.
  absl::StatusOr<std::vector<std::unique_ptr<RowStore>>> MakeStoresLocked(
      const std::vector<SparseTableInfo>& tables) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void SetTablesLocked(std::vector<std::unique_ptr<RowStore>> stores)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks a push's rows (one entry per table or none; ids owned, in range,
  // unique) and sorts each table's rows by id.
  absl::Status SortPushedRowsLocked(const PushHeader& h, PushedRows& rows) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void AccumulateRowsLocked(Pending& p, const PushedRows& rows, int32_t weight)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A complete step's rows, times `inv` (1 / its weight), sorted by id.
  PushedRows AveragedRowsLocked(Pending& p, float inv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Steps every table (those without rows too): one update.
  void StepTablesLocked(const PushedRows& rows, double lr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stores a capture holds, checked (sizes, ids, owners): nothing
  // changes before they all are.
  absl::StatusOr<std::vector<std::unique_ptr<RowStore>>> RestoreStoresLocked(
      const Capture& c) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // SYNC: applies the steps that are complete (every rank pushed them, or
  // after a restore moved past them) and skips those nobody will push;
  // true if next_sync_clock_ moved.
  bool AdvanceSyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a restore: what a pull for `clock` from `rank` tells (the header
  // comment); wakes waiters if anything moved.
  void RecoverOnPullLocked(int32_t rank, int64_t clock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SSP and ASYNC recovery: every chunk below `limit` that is not applied
  // is forgiven, and the watermark moves to at least `limit`.
  void ForgiveBelowLocked(int64_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether [first, end), below the watermark, is all forgiven; and takes
  // it out of the forgiven chunks (it is being applied).
  bool ForgivenLocked(int64_t first, int64_t end) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void UnforgiveLocked(int64_t first, int64_t end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Capture CaptureLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // UNAVAILABLE for `what` while a restore is awaited, else OK.
  absl::Status AwaitingRestoreLocked(absl::string_view what) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Takes a capture for NextCapture if one is due (`force`: at Init).
  void MaybeCaptureLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckCaptureLocked(const Capture& c) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // One update: every partition and every table.
  void StepLocked(const std::vector<std::vector<float>>& grads,
                  const PushedRows& rows, double lr)
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
  // The sparse tables, by id, and what checking their row ids needs.
  std::vector<std::unique_ptr<RowStore>> tables_ ABSL_GUARDED_BY(mu_);
  SparseLayout sparse_ ABSL_GUARDED_BY(mu_);
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
  // SSP and ASYNC after a restore: chunks below watermark_ that were never
  // applied (lost with the crash), still accepted once.
  std::map<int64_t, int64_t> forgiven_ ABSL_GUARDED_BY(mu_);
  // Restore and recovery (the header comment).
  bool awaiting_restore_ ABSL_GUARDED_BY(mu_) = false;
  bool restored_ ABSL_GUARDED_BY(mu_) = false;
  int64_t restored_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool recovering_ ABSL_GUARDED_BY(mu_) = false;                // SSP and ASYNC
  std::vector<int> pushes_since_restore_ ABSL_GUARDED_BY(mu_);  // per rank
  // Checkpoint policy and the capture handed to the writer.
  bool checkpoints_ ABSL_GUARDED_BY(mu_) = false;
  int64_t checkpoint_every_steps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration checkpoint_every_ ABSL_GUARDED_BY(mu_);
  int64_t last_capture_version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_capture_time_ ABSL_GUARDED_BY(mu_);
  std::optional<Capture> capture_ ABSL_GUARDED_BY(mu_);
  bool writer_busy_ ABSL_GUARDED_BY(mu_) = false;
  int64_t checkpoint_version_ ABSL_GUARDED_BY(mu_) = -1;  // newest written
  // Statistics, cumulative.
  int64_t pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_pulled_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_pulled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> staleness_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_ ABSL_GUARDED_BY(mu_);
  // The current rate window.
  absl::Time window_start_ ABSL_GUARDED_BY(mu_);
  int64_t window_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t window_pulls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_STATE_H_
