// Parameter-server shard checkpoints: a ShardState::Capture as a checkpoint
// file (common/checkpoint.h: atomic, CRC-checked, with retention) in
// <checkpoint.dir>/shard-<index>/ and back, the checks a restore makes, and
// the thread that writes them off the shard's lock.
//
// A shard checkpoint is a common/checkpoint.h file whose step is the shard's
// version (updates applied) and spec_hash the job's TrainingHash, with
//   metadata "kind" = "ps-shard" and "ps_state" = a ShardCheckpointState
//     (proto/ps.proto, binary): shard index, run id, layout, version and
//     the consistency bookkeeping (clocks, chunk watermark and ranges, the
//     per-worker push seqs);
//   tensors "p<id>/params" and "p<id>/opt<k>" (the optimizer's state
//     tensors) of every partition, in layout order;
//   per sparse table (ShardCheckpointState.tables), its stored rows:
//     "t<id>/ids_hi" and "t<id>/ids_lo" (the row ids in slot order, as two
//     float tensors of 24 bits each, id = hi * 2^24 + lo, exact for the
//     48-bit ids a table may have), "t<id>/values" and "t<id>/state" (the
//     rows' values and rule state, slot after slot) and "t<id>/steps" (the
//     rule's step count, {hi, lo} likewise).
//
// Thread safety: the functions are thread-safe for different directories.
// ShardCheckpointer owns one thread; see its comment.
#ifndef COHORT_SERVER_PS_SHARD_CHECKPOINT_H_
#define COHORT_SERVER_PS_SHARD_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "server/ps/shard_state.h"

namespace cohort {

// "<checkpoint_dir>/shard-<index>".
std::string ShardCheckpointDir(const std::string& checkpoint_dir,
                               int shard_index);

// The checkpoint of `c` (copies its tensors) for `job`'s run `run_id`.
Checkpoint EncodeShardCheckpoint(const ShardState::Capture& c,
                                 const JobSpec& job, const std::string& run_id);

// What a restored checkpoint must match: the coordinator's view of the
// shard (RegisterShardResponse).
struct ShardRestoreCheck {
  int shard_index = 0;
  std::string run_id;                 // empty: not checked
  std::vector<Partition> partitions;  // the shard's, from the plan
  int32_t world_size = 0;
  int32_t total_replicas = 0;
};
ShardRestoreCheck RestoreCheckOf(const RegisterShardResponse& assignment);

// Takes `ckpt` (read from `path`, named in messages) apart. DATA_LOSS when
// it is not a shard checkpoint, lacks a tensor or holds a row id or step
// count that is not an exact 48-bit integer; FAILED_PRECONDITION when
// it is of another job (model, optimizer...), run, shard index or layout
// than `job` and `expect` say. The parameters are moved, not copied.
absl::StatusOr<ShardState::Capture> DecodeShardCheckpoint(
    Checkpoint ckpt, const std::string& path, const JobSpec& job,
    const ShardRestoreCheck& expect);

struct LoadedShardCheckpoint {
  ShardState::Capture capture;
  std::string path;
  // Newer files that failed verification ("PATH: reason"), skipped.
  std::vector<std::string> rejected;
};
// The newest checkpoint in ShardCheckpointDir(job.checkpoint().dir(),
// expect.shard_index) that verifies, decoded and checked as above.
// NOT_FOUND when there is none; DATA_LOSS when none verifies.
absl::StatusOr<LoadedShardCheckpoint> LoadShardCheckpoint(
    const JobSpec& job, const ShardRestoreCheck& expect);

// Removes the checkpoint files (committed and temporary) in `dir`, which a
// fresh shard finds there from an earlier run: a restore must never take
// one of them. Returns how many; 0 when `dir` does not exist.
absl::StatusOr<int> RemoveShardCheckpoints(const std::string& dir);

// Writes the captures a ShardState hands out (NextCapture) to `dir`, one at
// a time, on its own thread: encoding copies the tensors, the shared
// parameters are released, and only then does the slow write (fsyncs)
// start, so the shard's lock is never held for it. A failed write is
// logged; the next due capture tries again.
//
// Ownership: borrows `state`, which must outlive it. The destructor waits
// for the thread, which ends once `state` is shut down (ShardState::
// Shutdown), after the write in progress.
class ShardCheckpointer {
 public:
  ShardCheckpointer(ShardState* state, std::string dir, int keep, JobSpec job,
                    std::string run_id, int shard_index);
  ~ShardCheckpointer();
  ShardCheckpointer(const ShardCheckpointer&) = delete;
  ShardCheckpointer& operator=(const ShardCheckpointer&) = delete;

 private:
  void Loop();

  ShardState* const state_;
  const std::string dir_;
  const int keep_;
  const JobSpec job_;
  const std::string run_id_;
  const int shard_index_;
  std::thread thread_;
};

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_CHECKPOINT_H_
