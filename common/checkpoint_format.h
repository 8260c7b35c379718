// Internal to //common:checkpoint: what its two halves share. Include
// common/checkpoint.h instead.
//
// checkpoint_format.cc owns the on-disk format that checkpoint.h documents:
// it encodes a Checkpoint into an open file and reads one file back with
// every length and CRC32C verified. checkpoint.cc owns the directory side:
// the atomic commit (temp file, fsync, rename, directory fsync), retention,
// listing, and loading the newest file that verifies.
//
// The functions keep no state and are thread-safe; a ScopedFd belongs to one
// thread.
#ifndef COHORT_COMMON_CHECKPOINT_FORMAT_H_
#define COHORT_COMMON_CHECKPOINT_FORMAT_H_

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint.h"

namespace cohort {
namespace checkpoint_internal {

// UNAVAILABLE "cannot WHAT PATH: <errno text>".
inline absl::Status ErrnoError(absl::string_view what, const std::string& path,
                               int err) {
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(err)));
}

// Closes the descriptor it owns on destruction.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports close(2)'s errno (0 on success).
  int Close() {
    const int rc = close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// INVALID_ARGUMENT when `c` cannot be written: negative step, a string over
// the format's limit, duplicate tensor names, a shape that does not match
// the values.
absl::Status ValidateForWrite(const Checkpoint& c);

// Writes all of `c` (header, tensors, footer) to `fd`, an empty file opened
// for writing; `path` names it in errors. Does not fsync.
absl::Status WriteContents(int fd, const std::string& path,
                           const Checkpoint& c);

// Reads and verifies the file at `path` (the contract of ReadCheckpointFile,
// but the errors carry only the reason; the caller adds the path).
absl::StatusOr<Checkpoint> ReadVerified(const std::string& path);

}  // namespace checkpoint_internal
}  // namespace cohort

#endif  // COHORT_COMMON_CHECKPOINT_FORMAT_H_
