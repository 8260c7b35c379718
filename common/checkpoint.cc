// The directory side of checkpoint.h: atomic commit, retention, listing and
// loading the newest checkpoint that verifies. The format itself lives in
// checkpoint_format.cc.
#include "common/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/checkpoint_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using checkpoint_internal::ErrnoError;
using checkpoint_internal::ReadVerified;
using checkpoint_internal::ScopedFd;
using checkpoint_internal::ValidateForWrite;
using checkpoint_internal::WriteContents;

constexpr absl::string_view kNamePrefix = "ckpt-";
constexpr absl::string_view kNameSuffix = ".cohort";
constexpr absl::string_view kTempInfix = ".tmp-";

using CrashAt = CheckpointWriteOptions::CrashAt;

void MaybeCrash(const CheckpointWriteOptions& o, CrashAt point) {
  if (o.crash_at == point) std::_Exit(42);
}

std::string JoinPath(const std::string& dir, absl::string_view name) {
  if (!dir.empty() && dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

// Writer pid of a temp name "ckpt-<digits>.cohort.tmp-<pid>", or -1.
pid_t PidOfTempName(absl::string_view name) {
  const size_t infix = name.rfind(kTempInfix);
  if (infix == absl::string_view::npos ||
      CheckpointStepOfFileName(name.substr(0, infix)) < 0) {
    return -1;
  }
  int pid = -1;
  const absl::string_view digits = name.substr(infix + kTempInfix.size());
  if (digits.empty() || !absl::SimpleAtoi(digits, &pid) || pid <= 0) return -1;
  return pid;
}

// Entry names of `dir` (without "." and ".."); *err is the errno on failure.
bool ListDir(const std::string& dir, std::vector<std::string>* names,
             int* err) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    *err = errno;
    return false;
  }
  errno = 0;
  while (struct dirent* e = readdir(d)) {
    const absl::string_view name = e->d_name;
    if (name != "." && name != "..") names->emplace_back(name);
  }
  *err = errno;
  closedir(d);
  return *err == 0;
}

// Committed checkpoints in `names`, newest step first.
std::vector<std::pair<int64_t, std::string>> CommittedNewestFirst(
    const std::vector<std::string>& names) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const std::string& name : names) {
    const int64_t step = CheckpointStepOfFileName(name);
    if (step >= 0) out.emplace_back(step, name);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// Writes and fsyncs `tmp`; removes it again on any failure.
absl::Status WriteTempFile(const std::string& tmp, const Checkpoint& c,
                           const CheckpointWriteOptions& o) {
  // O_NOFOLLOW: a link planted under the temp name is not written through.
  ScopedFd fd(open(tmp.c_str(),
                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                   0644));
  if (fd.get() < 0) return ErrnoError("create", tmp, errno);
  absl::Status s = WriteContents(fd.get(), tmp, c);
  if (s.ok()) {
    MaybeCrash(o, CrashAt::kAfterTempWrite);
    if (fsync(fd.get()) != 0) s = ErrnoError("fsync", tmp, errno);
  }
  // close(2) can report a deferred write error (NFS), so it is checked too.
  const int close_err = fd.Close();
  if (s.ok() && close_err != 0) s = ErrnoError("close", tmp, close_err);
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

absl::Status SyncDir(const std::string& dir) {
  ScopedFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open directory", dir, errno);
  if (fsync(fd.get()) != 0) return ErrnoError("fsync directory", dir, errno);
  return absl::OkStatus();
}

// mkdir -p, fsyncing each parent a directory was created in.
absl::Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "cannot use ", dir, " as checkpoint directory: not a directory"));
  }
  if (errno != ENOENT) return ErrnoError("access", dir, errno);
  std::string parent = dir;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  const size_t slash = parent.rfind('/');
  parent = slash == std::string::npos ? "." : parent.substr(0, slash);
  if (parent.empty()) parent = "/";
  RETURN_IF_ERROR(MakeDirs(parent));
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError("create directory", dir, errno);
  }
  return SyncDir(parent);
}

// Deletes committed checkpoints beyond the newest `o.keep` (oldest first, and
// only ones older than `committed_step`), then temp files whose writer
// process no longer exists. Failures are logged: the new checkpoint is
// already durable, so they must not make the write look failed.
void ApplyRetention(const std::string& dir, int64_t committed_step,
                    const CheckpointWriteOptions& o) {
  std::vector<std::string> names;
  int err = 0;
  if (!ListDir(dir, &names, &err)) {
    LOG(WARNING) << "checkpoint retention: cannot list " << dir << ": "
                 << std::strerror(err);
    MaybeCrash(o, CrashAt::kDuringRetention);
    return;
  }
  const auto committed = CommittedNewestFirst(names);
  for (size_t i = committed.size(); i-- > 0;) {
    if (o.only_this ? committed[i].first == committed_step
                    : i < static_cast<size_t>(o.keep) ||
                          committed[i].first >= committed_step) {
      continue;
    }
    const std::string path = JoinPath(dir, committed[i].second);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      const int unlink_err = errno;  // before LOG can clobber it
      LOG(WARNING) << "checkpoint retention: cannot delete " << path << ": "
                   << std::strerror(unlink_err);
      continue;
    }
    MaybeCrash(o, CrashAt::kDuringRetention);
  }
  MaybeCrash(o, CrashAt::kDuringRetention);
  for (const std::string& name : names) {
    const pid_t pid = PidOfTempName(name);
    if (pid < 0 || pid == getpid()) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // writer may be alive
    const std::string path = JoinPath(dir, name);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      const int unlink_err = errno;
      LOG(WARNING) << "checkpoint retention: cannot delete stale temp file "
                   << path << ": " << std::strerror(unlink_err);
    }
  }
}

}  // namespace

std::string CheckpointFileName(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "ckpt-%012lld.cohort",
                static_cast<long long>(step));
  return buf;
}

int64_t CheckpointStepOfFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kNamePrefix) ||
      !absl::ConsumeSuffix(&name, kNameSuffix) || name.empty() ||
      name.size() > 18) {
    return -1;
  }
  for (char ch : name) {
    if (ch < '0' || ch > '9') return -1;
  }
  int64_t step = -1;
  return absl::SimpleAtoi(name, &step) ? step : -1;
}

absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& c,
                             const CheckpointWriteOptions& o) {
  if (o.keep < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint retention keep=", o.keep, " must be at least 1"));
  }
  RETURN_IF_ERROR(ValidateForWrite(c));
  RETURN_IF_ERROR(MakeDirs(dir));
  const std::string path = JoinPath(dir, CheckpointFileName(c.step));
  const std::string tmp = absl::StrCat(path, kTempInfix, getpid());
  RETURN_IF_ERROR(WriteTempFile(tmp, c, o));
  MaybeCrash(o, CrashAt::kAfterFsync);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status s = ErrnoError("rename to", path, errno);
    unlink(tmp.c_str());
    return s;
  }
  MaybeCrash(o, CrashAt::kAfterRename);
  absl::Status synced = SyncDir(dir);
  if (!synced.ok()) {
    return absl::UnavailableError(
        absl::StrCat(synced.message(), " (", path,
                     " is complete but may not survive a system crash)"));
  }
  MaybeCrash(o, CrashAt::kAfterDirFsync);
  ApplyRetention(dir, c.step, o);
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path) {
  absl::StatusOr<Checkpoint> c = ReadVerified(path);
  if (c.ok()) return c;
  return absl::Status(c.status().code(),
                      absl::StrCat(path, ": ", c.status().message()));
}

absl::StatusOr<Checkpoint> LoadLatestCheckpoint(
    const std::string& dir, std::vector<std::string>* rejected) {
  std::vector<std::string> names;
  int err = 0;
  if (!ListDir(dir, &names, &err)) {
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "no checkpoint in ", dir, ": the directory does not exist"));
    }
    return ErrnoError("list checkpoint directory", dir, err);
  }
  const auto committed = CommittedNewestFirst(names);
  if (committed.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint in ", dir,
                                            ": no ckpt-<step>.cohort files"));
  }
  std::vector<std::string> failures;
  for (const auto& [step, name] : committed) {
    const std::string path = JoinPath(dir, name);
    absl::StatusOr<Checkpoint> c = ReadCheckpointFile(path);
    std::string failure;
    if (!c.ok()) {
      failure = std::string(c.status().message());
    } else if (c->step != step) {
      failure = absl::StrCat(path, ": header says step ", c->step,
                             " but the file name says ", step);
    } else {
      return c;
    }
    if (rejected != nullptr) rejected->push_back(failure);
    failures.push_back(std::move(failure));
  }
  return absl::DataLossError(absl::StrCat("no valid checkpoint in ", dir, ": ",
                                          absl::StrJoin(failures, "; ")));
}

}  // namespace cohort
