// An exclusive, process-lifetime lock on a directory (flock on a
// ".lock" file in it), so that two processes cannot share state kept
// there. The kernel drops the lock when the process dies, kill -9
// included, so a restarted process takes it again at once. The lock file
// says who holds it, for the message the next process prints.
//
// Ownership: the object owns the lock's file descriptor; destroying it
// releases the lock. Thread safety: not thread-safe; one owner.
#ifndef COHORT_COMMON_DIR_LOCK_H_
#define COHORT_COMMON_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace cohort {

class DirectoryLock {
 public:
  // Locks `dir` (which must exist) for this process, recording `holder`
  // (e.g. "pid 12, coordinator on host:29400"). FAILED_PRECONDITION naming
  // the holder when another process has it, or when the lock file's name
  // holds a symbolic link, a FIFO or anything else not a regular file
  // (never followed, written or waited on); INTERNAL for a file error.
  static absl::StatusOr<std::unique_ptr<DirectoryLock>> Acquire(
      const std::string& dir, const std::string& holder);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // Rewrites who holds it (once the address is known).
  void SetHolder(const std::string& holder);

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace cohort

#endif  // COHORT_COMMON_DIR_LOCK_H_
