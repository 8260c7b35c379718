// A whole file mapped read-only (mmap), for data sets that read large files
// in place: memory then holds only the pages being read.
//
// Ownership: owns the mapping; unmapped on destruction unless Release()d.
// Thread safety: immutable after Map, so any thread may read view().
#ifndef COHORT_WORKER_DATA_MAPPED_FILE_H_
#define COHORT_WORKER_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` (a regular file; an empty one maps nothing). Errors name
  // the path.
  absl::Status Map(const std::string& path);
  // Maps the open regular file `fd` (which the caller still owns and may
  // close: the mapping keeps the file), e.g. an unlinked temporary file
  // that has no path. Errors name `name`.
  absl::Status MapDescriptor(int fd, const std::string& name);

  absl::string_view view() const {
    return absl::string_view(static_cast<const char*>(map_), bytes_);
  }
  void* map() const { return map_; }
  size_t bytes() const { return bytes_; }
  // Hands the mapping to the caller, who must munmap(map(), bytes()).
  void Release() { map_ = nullptr; }

 private:
  void* map_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_MAPPED_FILE_H_
