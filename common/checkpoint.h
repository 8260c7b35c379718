// Durable training checkpoints: one self-checking binary file per step.
//
// Files are named `ckpt-<step, 12 digits zero-padded>.cohort` inside a
// checkpoint directory. WriteCheckpoint commits a file atomically (temp file,
// fsync, rename, directory fsync) and then prunes old ones; a crash at any
// point leaves either the previous set of checkpoints or the new one, never
// a torn file under a final name. LoadLatestCheckpoint returns the newest
// file that verifies, skipping (and reporting) damaged ones.
//
// File format, version 1. All integers little-endian; "str" is a uint32
// byte count followed by that many bytes (no terminator).
//
//   offset 0   char[8]  magic "COHORTCK"
//          8   uint32   format version (1)
//         12   uint32   H, the byte length of the header body that follows
//         16   header body (H bytes):
//                int64   step          global step
//                int64   epoch
//                int64   epoch_offset  samples of `epoch`'s order done
//                uint64  generation
//                uint64  spec_hash
//                uint32  M, then M x (str key, str value)   metadata, sorted
//                uint32  T, then T x tensor entry:
//                  str     name
//                  uint32  rank R, then R x int64 dims
//                  uint64  byte length (4 x product of dims)
//                  uint32  CRC32C of the tensor's bytes
//   16 + H     uint32   CRC32C of bytes [0, 16 + H)
//   then       the tensors' raw float32 bytes, in table order, back to back
//   footer (last 20 bytes):
//              uint64   total file length
//              uint32   CRC32C of every byte before the footer
//              char[8]  magic "COHORTEN"
//
// Reading is plain data parsing: nothing in a file is executed or used as a
// type name. Every length is checked against the real file size before any
// buffer is sized from it, so a corrupted length cannot allocate more memory
// than the file itself holds.
//
// All functions are thread-safe for different directories; two writers must
// not share one directory at the same time.
#ifndef COHORT_COMMON_CHECKPOINT_H_
#define COHORT_COMMON_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;  // {} is a scalar (one value)
  std::vector<float> values;   // row-major, product(shape) of them
};

struct Checkpoint {
  int64_t step = 0;  // global step; names the file (must be >= 0)
  int64_t epoch = 0;
  // The sampler's position: samples of `epoch`'s order already trained
  // (worker/data/sampler.h, IndicesFrom).
  int64_t epoch_offset = 0;
  uint64_t generation = 0;
  uint64_t spec_hash = 0;
  std::map<std::string, std::string> metadata;
  std::vector<CheckpointTensor> tensors;  // names unique
};

struct CheckpointWriteOptions {
  // Committed checkpoints to keep, the new one included (>= 1).
  int keep = 3;
  // Retention deletes every other committed checkpoint, newer ones too: a
  // directory that holds one chosen checkpoint (the best one, whose step
  // need not be the newest a crashed run left there).
  bool only_this = false;

  // For crash tests only: the writer calls std::_Exit(42) at this point.
  enum class CrashAt {
    kNone,
    kAfterTempWrite,   // temp file written, not yet fsynced
    kAfterFsync,       // temp file fsynced, not yet renamed
    kAfterRename,      // renamed, directory not yet fsynced
    kAfterDirFsync,    // committed, retention not yet run
    kDuringRetention,  // after deleting one old file (or at the end of
                       // retention when there is nothing to delete)
  };
  CrashAt crash_at = CrashAt::kNone;
};

// "ckpt-000000000042.cohort" for step 42.
std::string CheckpointFileName(int64_t step);

// The step a committed checkpoint's file name carries (42 for
// "ckpt-000000000042.cohort"), or -1 for any other name, a writer's temp
// file included.
int64_t CheckpointStepOfFileName(absl::string_view name);

// Writes `c` as `dir`/CheckpointFileName(c.step), creating `dir` if needed,
// then keeps the newest `o.keep` checkpoints (never deleting one at or after
// c.step) and removes temp files left by writers that have died.
// INVALID_ARGUMENT for an inconsistent `c` (negative step, shape that does
// not match the values, duplicate tensor names); UNAVAILABLE naming the path
// and the errno text when the file system refuses. On error no file is left
// under the final name (an existing one of the same step is untouched).
absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& c,
                             const CheckpointWriteOptions& o = {});

// Reads and verifies one file. DATA_LOSS "PATH: reason" when it is truncated,
// corrupted or not a checkpoint; NOT_FOUND when it does not exist;
// UNAVAILABLE for other read errors.
absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path);

// The newest checkpoint in `dir` that verifies (by the step in the file
// name; the header's step must agree). Each newer file that fails appends
// "PATH: reason" to *rejected (when given); the caller logs these, the files
// are left in place. NOT_FOUND naming `dir` when it holds no checkpoint file
// (or does not exist); DATA_LOSS listing every failure when none verifies.
absl::StatusOr<Checkpoint> LoadLatestCheckpoint(
    const std::string& dir, std::vector<std::string>* rejected = nullptr);

}  // namespace cohort

#endif  // COHORT_COMMON_CHECKPOINT_H_
