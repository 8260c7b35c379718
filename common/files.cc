#include "common/files.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Creates and removes a file in `dir`.
absl::Status ProbeDir(const std::string& dir, const std::string& what) {
  std::string name = absl::StrCat(dir, "/.cohort-probe-XXXXXX");
  const int fd = mkstemp(name.data());
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write ", what, ": ", dir, ": ", std::strerror(errno)));
  }
  close(fd);
  unlink(name.c_str());
  return absl::OkStatus();
}

// Creates a new, empty temporary file beside `path` for writing (never
// one that exists: a link planted under the name is not followed).
absl::StatusOr<int> CreateTemp(const std::string& path, std::string* tmp) {
  static std::atomic<uint64_t> counter{0};
  while (true) {
    *tmp = absl::StrCat(path, ".tmp.", getpid(), ".", counter++);
    const int fd =
        open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
             0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return Errno("create", *tmp);
  }
}

// "16 MiB" or "1000 bytes".
std::string BytesLimit(int64_t bytes) {
  if (bytes > 0 && bytes % (1 << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB");
  }
  return absl::StrCat(bytes, " bytes");
}

absl::Status TooLarge(const std::string& path, int64_t max_bytes,
                      absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " ", path, " is larger than ", BytesLimit(max_bytes),
                   "; it should be a short text file"));
}

// How long a pipe may stay silent before the read gives up.
constexpr int kPipeSilenceMs = 10000;

// The contents of the pipe `fd` (opened non-blocking), up to `max_bytes`:
// what `--job=<(envsubst < job.tmpl)` hands over. A FIFO nobody writes to
// is refused at once rather than read as an empty spec, and a writer that
// goes silent for kPipeSilenceMs ends the read, so neither can hang.
absl::StatusOr<std::string> ReadPipe(int fd, const std::string& path,
                                     int64_t max_bytes,
                                     absl::string_view what) {
  std::string text;
  char buf[1 << 14];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, n);
      if (static_cast<int64_t>(text.size()) > max_bytes) {
        return TooLarge(path, max_bytes, what);
      }
      continue;
    }
    if (n == 0) {
      if (text.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " ", path, " is a FIFO that nothing writes to"));
      }
      return text;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      return absl::DataLossError(absl::StrCat("cannot read ", what, " ", path,
                                              ": ", std::strerror(errno)));
    }
    pollfd p = {fd, POLLIN, 0};
    const int ready = poll(&p, 1, kPipeSilenceMs);
    if (ready == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " ", path, ": the pipe gave nothing for ",
                       kPipeSilenceMs / 1000, " s"));
    }
  }
}

// The contents of the open file `fd`, read only if it is a regular file (or
// a pipe) of at most `max_bytes`.
absl::StatusOr<std::string> ReadBounded(int fd, const std::string& path,
                                        int64_t max_bytes,
                                        absl::string_view what) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot read ", what, " ", path));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is a directory, not a file"));
  }
  if (S_ISFIFO(st.st_mode)) return ReadPipe(fd, path, max_bytes, what);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is ",
                                                   FileTypeName(st.st_mode),
                                                   ", not a regular file"));
  }
  if (st.st_size > max_bytes) return TooLarge(path, max_bytes, what);
  std::string text;
  char buf[1 << 14];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(absl::StrCat("cannot read ", what, " ", path,
                                              ": ", std::strerror(errno)));
    }
    if (n == 0) return text;
    text.append(buf, n);
    // It may have grown since fstat.
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      return TooLarge(path, max_bytes, what);
    }
  }
}

}  // namespace

std::string FileTypeName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a file of an unknown type";
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return Errno("read", path);
  }
  absl::StatusOr<std::string> text =
      ReadBounded(fd, path, std::numeric_limits<int64_t>::max(), "file");
  close(fd);
  return text;
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            int64_t max_bytes,
                                            absl::string_view what) {
  // Without O_NONBLOCK, opening a FIFO would wait for a writer.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot open ", what, " ", path));
  }
  absl::StatusOr<std::string> text = ReadBounded(fd, path, max_bytes, what);
  close(fd);
  return text;
}

absl::Status CheckOutputTarget(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": it is a directory"));
  }
  if (S_ISLNK(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path,
                     ": it is a symbolic link, which cohort neither follows "
                     "nor replaces; name the file it points to"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write ", path, ": it is ", FileTypeName(st.st_mode),
                   ", not a regular file, and cohort replaces only regular "
                   "files"));
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  // A rename replaces whatever the name holds: check first. (A file put
  // there between this check and the rename is replaced; only a caller
  // racing itself can do that.)
  RETURN_IF_ERROR(CheckOutputTarget(path));
  std::string tmp;
  ASSIGN_OR_RETURN(const int fd, CreateTemp(path, &tmp));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = Errno("write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    absl::Status s = Errno("flush", tmp);
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("rename to", path);
    unlink(tmp.c_str());
    return s;
  }
  const int dir = open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return absl::OkStatus();
}

absl::Status CheckCanWriteFile(const std::string& path) {
  RETURN_IF_ERROR(CheckOutputTarget(path));
  return ProbeDir(DirName(path), path);
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

absl::Status CheckCanWriteDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  return ProbeDir(dir, dir);
}

}  // namespace cohort
