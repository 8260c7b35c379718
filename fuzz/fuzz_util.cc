#include "fuzz/fuzz_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/stubs/logging.h"

namespace cohort {
namespace fuzz {
namespace {

[[noreturn]] void Die(absl::string_view what, const std::string& path) {
  std::fprintf(stderr, "fuzz scratch directory: cannot %s %s: %s\n",
               std::string(what).c_str(), path.c_str(), std::strerror(errno));
  std::abort();
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

// Removes `path` and everything under it (depth first, links not followed).
void RemoveTree(const std::string& path) {
  if (nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) != 0 &&
      errno != ENOENT) {
    Die("remove", path);
  }
}

void MakeParents(const std::string& root, const std::string& name) {
  for (size_t slash = name.find('/'); slash != std::string::npos;
       slash = name.find('/', slash + 1)) {
    const std::string dir = absl::StrCat(root, "/", name.substr(0, slash));
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) Die("create", dir);
  }
}

}  // namespace

std::vector<absl::string_view> SplitInput(absl::string_view data) {
  return absl::StrSplit(data, kSplit);
}

void SilenceProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
}

bool CheckKnownBugs() {
  static const bool on = [] {
    const char* v = std::getenv("COHORT_FUZZ_KNOWN_BUGS");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

std::string Describe(absl::string_view what, const absl::Status& s) {
  return absl::StrCat(what, ": ", s.ToString());
}

ScratchDir::ScratchDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  std::string tmpl = absl::StrCat(base, "/cohort-fuzz-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) Die("create", tmpl);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() { RemoveTree(path_); }

std::string ScratchDir::Write(const std::string& name,
                              absl::string_view bytes) const {
  MakeParents(path_, name);
  const std::string path = absl::StrCat(path_, "/", name);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) Die("create", path);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) Die("write", path);
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (close(fd) != 0) Die("close", path);
  return path;
}

void ScratchDir::Clear() const {
  RemoveTree(path_);
  if (mkdir(path_.c_str(), 0700) != 0) Die("recreate", path_);
}

}  // namespace fuzz
}  // namespace cohort
