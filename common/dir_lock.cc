#include "common/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace cohort {
namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  off_t at = 0;
  while ((n = pread(fd, buf, sizeof(buf), at)) > 0 && out.size() < 4096) {
    out.append(buf, n);
    at += n;
  }
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirectoryLock>> DirectoryLock::Acquire(
    const std::string& dir, const std::string& holder) {
  const std::string path = dir + "/.lock";
  // The holder is written into the file: never through a symbolic link
  // (as root, into whatever it names), and never into a FIFO or a device,
  // which O_NONBLOCK keeps the open from waiting on.
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
           0644);
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " is a symbolic link; remove it (cohort makes its own lock file)"));
  }
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " is not a regular file; remove it (cohort makes its own lock "
        "file)"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string who = ReadAll(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " is in use by another process (",
                       who.empty() ? "it has not said who it is" : who,
                       "); give each its own directory"));
    }
    return absl::InternalError(
        absl::StrCat("cannot lock ", path, ": ", std::strerror(error)));
  }
  std::unique_ptr<DirectoryLock> lock(new DirectoryLock(fd));
  lock->SetHolder(holder);
  return lock;
}

DirectoryLock::~DirectoryLock() { close(fd_); }

void DirectoryLock::SetHolder(const std::string& holder) {
  // Only a message for the next process: a failed write loses nothing.
  if (ftruncate(fd_, 0) != 0) return;
  const std::string line = holder + "\n";
  (void)!pwrite(fd_, line.data(), line.size(), 0);
}

}  // namespace cohort
