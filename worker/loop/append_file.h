// A log file written at its end through a buffer: Append() keeps bytes in
// memory, Flush() hands them to the kernel (write(2)), so a process that
// dies loses only what it appended since its last Flush. No fsync: the rows
// survive a crash of the process, not of the machine, which is all a
// training log needs and costs nothing per step.
//
// Only a regular file is appended to: a symbolic link, a FIFO or a device
// under the name is refused, as common/files.h refuses them for outputs.
//
// Ownership: owns its descriptor (closed, after a last Flush, by the
// destructor). Thread safety: none; one thread writes.
#ifndef COHORT_WORKER_LOOP_APPEND_FILE_H_
#define COHORT_WORKER_LOOP_APPEND_FILE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

class AppendFile {
 public:
  // Opens `path` for appending, creating it if needed. With `exclusive`,
  // ALREADY_EXISTS when something is there. INVALID_ARGUMENT for a path
  // that is not a regular file; UNAVAILABLE naming the path and the errno
  // text otherwise.
  static absl::StatusOr<std::unique_ptr<AppendFile>> Open(
      const std::string& path, bool exclusive);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void Append(absl::string_view bytes) {
    buffer_.append(bytes.data(), bytes.size());
  }
  // Writes what was appended; UNAVAILABLE naming the path on failure (what
  // could not be written is dropped, so a later Flush does not repeat it).
  absl::Status Flush();
  bool pending() const { return !buffer_.empty(); }
  const std::string& path() const { return path_; }

 private:
  AppendFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
  std::string buffer_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_LOOP_APPEND_FILE_H_
