#include "worker/loop/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace cohort {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<AppendFile>> AppendFile::Open(
    const std::string& path, bool exclusive) {
  // O_NOFOLLOW refuses a link; O_NONBLOCK keeps a FIFO from hanging the
  // open, and fstat below refuses it.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
                    O_CLOEXEC | (exclusive ? O_EXCL : 0);
  const int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
    }
    if (errno == ELOOP) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write ", path, ": it is a symbolic link, not a file"));
    }
    return Errno("open", path);
  }
  struct stat st = {};
  if (fstat(fd, &st) != 0) {
    const absl::Status s = Errno("stat", path);
    close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": it is ",
                     FileTypeName(st.st_mode), ", not a regular file"));
  }
  return std::unique_ptr<AppendFile>(new AppendFile(path, fd));
}

AppendFile::~AppendFile() {
  (void)Flush();
  close(fd_);
}

absl::Status AppendFile::Flush() {
  size_t done = 0;
  absl::Status status;
  while (done < buffer_.size()) {
    const ssize_t n = write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = Errno("write", path_);
      break;
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return status;
}

}  // namespace cohort
