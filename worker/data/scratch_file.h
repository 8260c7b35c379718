// An unlinked temporary file that a data set writes once, front to back,
// and then reads through a read-only mapping: decoded records larger than
// memory live in the page cache and on disk, and the file vanishes with the
// process however it ends (it has no name from the start).
//
// Ownership: owns its descriptor and write buffer; Map() hands the contents
// over as a MappedFile. Thread safety: none (one writer).
#ifndef COHORT_WORKER_DATA_SCRATCH_FILE_H_
#define COHORT_WORKER_DATA_SCRATCH_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/mapped_file.h"

namespace cohort {

class ScratchFile {
 public:
  // The directory scratch files go to when none is given: $TMPDIR if set,
  // else /tmp.
  static std::string DefaultDir();

  // A new empty file in `dir` (DefaultDir() when empty): opened with
  // O_TMPFILE, or, where the file system lacks it, made with mkstemp and
  // unlinked at once. Errors name the directory.
  static absl::StatusOr<std::unique_ptr<ScratchFile>> Create(std::string dir);

  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Appends `bytes` bytes (through a fixed buffer). ResourceExhausted for a
  // full disk, naming the directory and how much was written.
  absl::Status Append(const void* data, size_t bytes);

  // Bytes appended so far.
  int64_t size() const { return written_ + static_cast<int64_t>(used_); }

  // Writes what is buffered and maps the whole file read-only; the file
  // takes no more appends.
  absl::StatusOr<std::unique_ptr<MappedFile>> Map();

 private:
  ScratchFile(int fd, std::string dir);
  absl::Status Flush();

  int fd_;
  const std::string dir_;
  std::vector<char> buffer_;
  size_t used_ = 0;
  int64_t written_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_SCRATCH_FILE_H_
