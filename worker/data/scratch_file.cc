#include "worker/data/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// Large enough that writes cost one system call per megabyte.
constexpr size_t kBufferBytes = size_t{1} << 20;

absl::Status ScratchError(int err, const std::string& what,
                          const std::string& dir) {
  return absl::ErrnoToStatus(
      err, absl::StrCat(what, " a temporary file in ", QuoteName(dir),
                        " (set TMPDIR to a directory with room)"));
}

// O_TMPFILE where the file system has it; mkstemp and unlink elsewhere.
int OpenUnlinked(const std::string& dir) {
#ifdef O_TMPFILE
  const int unnamed = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (unnamed >= 0) return unnamed;
  // Only a file system without O_TMPFILE falls through; other errors
  // (missing directory, no permission) would fail mkstemp alike.
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return -1;
#endif
  std::string name = dir + "/cohort-scratch-XXXXXX";
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) unlink(name.c_str());
  return fd;
}

}  // namespace

std::string ScratchFile::DefaultDir() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && tmpdir[0] != '\0' ? tmpdir : "/tmp";
}

absl::StatusOr<std::unique_ptr<ScratchFile>> ScratchFile::Create(
    std::string dir) {
  if (dir.empty()) dir = DefaultDir();
  const int fd = OpenUnlinked(dir);
  if (fd < 0) return ScratchError(errno, "cannot create", dir);
  return std::unique_ptr<ScratchFile>(new ScratchFile(fd, std::move(dir)));
}

ScratchFile::ScratchFile(int fd, std::string dir)
    : fd_(fd), dir_(std::move(dir)), buffer_(kBufferBytes) {}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status ScratchFile::Append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    if (used_ == buffer_.size()) RETURN_IF_ERROR(Flush());
    const size_t n = std::min(bytes, buffer_.size() - used_);
    std::memcpy(buffer_.data() + used_, p, n);
    used_ += n;
    p += n;
    bytes -= n;
  }
  return absl::OkStatus();
}

absl::Status ScratchFile::Flush() {
  size_t done = 0;
  while (done < used_) {
    const ssize_t n = write(fd_, buffer_.data() + done, used_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      return ScratchError(
          err, absl::StrCat("cannot write ", written_ + done, "+ bytes to"),
          dir_);
    }
    done += static_cast<size_t>(n);
  }
  written_ += static_cast<int64_t>(used_);
  used_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MappedFile>> ScratchFile::Map() {
  RETURN_IF_ERROR(Flush());
  auto mapped = std::make_unique<MappedFile>();
  RETURN_IF_ERROR(
      mapped->MapDescriptor(fd_, absl::StrCat("a temporary file in ", dir_)));
  close(fd_);  // the mapping keeps the file
  fd_ = -1;
  buffer_ = std::vector<char>();
  return mapped;
}

}  // namespace cohort
