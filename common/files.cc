#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return Errno("read", path);
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return Errno("read", path);
  return s.str();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("create", tmp);
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
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": it is a directory"));
  }
  return ProbeDir(DirName(path), path);
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
