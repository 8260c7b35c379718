#include "worker/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/quote.h"

namespace cohort {

MappedFile::~MappedFile() {
  if (map_ != nullptr) munmap(map_, bytes_);
}

absl::Status MappedFile::Map(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err,
                               absl::StrCat("cannot open ", QuoteName(path)));
  }
  const absl::Status mapped = MapDescriptor(fd, path);
  close(fd);  // the mapping keeps the file
  return mapped;
}

absl::Status MappedFile::MapDescriptor(int fd, const std::string& name) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(name), " is not a regular file"));
  }
  if (st.st_size > 0) {
    void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      return absl::ErrnoToStatus(err,
                                 absl::StrCat("cannot map ", QuoteName(name)));
    }
    map_ = map;
    bytes_ = st.st_size;
  }
  return absl::OkStatus();
}

}  // namespace cohort
