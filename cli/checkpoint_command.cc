// `cohort checkpoint verify DIR`: is every checkpoint in DIR intact? And
// `cohort checkpoint show FILE`: what does one hold?
//
// An operator runs it before trusting a directory (after a crash, a copy
// between machines, a chaos test): each ckpt-*.cohort file is read and
// verified in full with ReadCheckpointFile, the same code a resuming job
// uses, so "OK" here means a job could restore that file.
#include "cli/checkpoint_command.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "cli/flags.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "worker/trained_model.h"

namespace cohort {
namespace {

constexpr char kUsage[] =
    "usage: cohort checkpoint verify DIR\n"
    "  Reads and verifies every ckpt-*.cohort file in DIR (checksums, "
    "lengths,\n"
    "  the step in the name against the header, the model its job spec "
    "describes\n"
    "  against its tensors) and prints one line per file. A FIFO, device or "
    "socket\n"
    "  under a checkpoint's name fails at once, never waited on.\n"
    "  Exit status 0 only when every file verifies.\n"
    "usage: cohort checkpoint show FILE\n"
    "  Verifies one checkpoint file as verify does and prints what it holds: "
    "its\n"
    "  step, the job spec that wrote it, and its tensors (each parameter's\n"
    "  PyTorch-style name, shape and offset, as JSON on the line after\n"
    "  \"state_names:\").\n";

constexpr absl::string_view kPrefix = "ckpt-";
constexpr absl::string_view kSuffix = ".cohort";

// The ckpt-*.cohort names in `dir`, sorted (zero-padded steps sort by step).
// Temp files ("....cohort.tmp-PID") are not checkpoints and are skipped.
absl::StatusOr<std::vector<std::string>> CheckpointNames(
    const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint directory ", dir, " does not exist"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot stat ", dir, ": ", std::strerror(err)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, " is not a directory (give the checkpoint dir)"));
  }
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot list ", dir, ": ", std::strerror(errno)));
  }
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    const absl::string_view name = e->d_name;
    if (absl::StartsWith(name, kPrefix) && absl::EndsWith(name, kSuffix)) {
      names.emplace_back(name);
    }
  }
  closedir(d);
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("no ckpt-*.cohort files in ", dir));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The step a file name carries, or -1 when the middle is not digits.
int64_t StepOfName(absl::string_view name) {
  name.remove_prefix(kPrefix.size());
  name.remove_suffix(kSuffix.size());
  int64_t step = -1;
  if (name.empty() || name.size() > 18 ||
      !std::all_of(name.begin(), name.end(),
                   [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(name, &step)) {
    return -1;
  }
  return step;
}

// "CODE: reason" for a failed `s` whose message starts with `path`, which
// the verify line already names.
std::string Failure(const absl::Status& s, const std::string& path) {
  absl::string_view reason = s.message();
  absl::ConsumePrefix(&reason, absl::StrCat(path, ": "));
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", reason);
}

// Why the model `c` records could not be rebuilt from it ("" when it can,
// or when `c` records no job spec, as older checkpoints do not): the checks
// export and predict make before they build it.
std::string RecordedModelFailure(const Checkpoint& c, const std::string& path) {
  if (c.metadata.count("job_spec") == 0) return "";
  const absl::Status s = CheckRecordedModel(c, path).status();
  return s.ok() ? "" : Failure(s, path);
}

// Verifies one file and prints its line; returns the failure reason ("" when
// the file verifies).
std::string VerifyOne(const std::string& dir, const std::string& name) {
  const std::string path =
      absl::StrCat(dir, dir.back() == '/' ? "" : "/", name);
  struct stat st;
  const std::string bytes =
      lstat(path.c_str(), &st) == 0 ? absl::StrCat(st.st_size) : "-";
  std::string failure;
  absl::StatusOr<Checkpoint> c = ReadCheckpointFile(path);
  if (!c.ok()) {
    failure = Failure(c.status(), path);
  } else if (StepOfName(name) != c->step) {
    failure = absl::StrCat("DATA_LOSS: the header says step ", c->step,
                           " but the file name does not");
  } else {
    failure = RecordedModelFailure(*c, path);
  }
  if (!c.ok()) {
    std::printf("%-26s %8s %6s %9s %7s %10s  %s\n", name.c_str(), "-", "-", "-",
                "-", bytes.c_str(), failure.c_str());
  } else {
    std::printf("%-26s %8lld %6lld %9lld %7zu %10s  %s\n", name.c_str(),
                static_cast<long long>(c->step),
                static_cast<long long>(c->epoch),
                static_cast<long long>(c->epoch_offset), c->tensors.size(),
                bytes.c_str(), failure.empty() ? "OK" : failure.c_str());
  }
  return failure;
}

absl::Status Verify(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, CheckpointNames(dir));
  std::printf("%-26s %8s %6s %9s %7s %10s  %s\n", "FILE", "STEP", "EPOCH",
              "SAMPLE", "TENSORS", "BYTES", "RESULT");
  std::vector<std::string> bad;
  for (const std::string& name : names) {
    if (!VerifyOne(dir, name).empty()) bad.push_back(name);
  }
  std::fflush(stdout);
  if (!bad.empty()) {
    return absl::DataLossError(
        absl::StrCat(bad.size(), " of ", names.size(), " checkpoint files in ",
                     dir, " fail verification: ", absl::StrJoin(bad, ", ")));
  }
  std::printf("%zu checkpoint files in %s: all OK\n", names.size(),
              dir.c_str());
  return absl::OkStatus();
}

// Prints what one checkpoint file holds.
absl::Status Show(const std::string& path) {
  ASSIGN_OR_RETURN(const Checkpoint c, ReadCheckpointFile(path));
  if (c.metadata.count("job_spec") != 0) {
    RETURN_IF_ERROR(CheckRecordedModel(c, path).status());
  }
  std::printf("%s: step %lld, epoch %lld, sample %lld, generation %llu\n",
              path.c_str(), static_cast<long long>(c.step),
              static_cast<long long>(c.epoch),
              static_cast<long long>(c.epoch_offset),
              static_cast<unsigned long long>(c.generation));
  for (const CheckpointTensor& t : c.tensors) {
    std::printf("tensor %s [%s]\n", t.name.c_str(),
                absl::StrJoin(t.shape, ", ").c_str());
  }
  for (const auto& [key, value] : c.metadata) {
    if (key == "job_spec" || key == "state_names") continue;
    std::printf("%s: %s\n", key.c_str(), value.c_str());
  }
  const auto spec = c.metadata.find("job_spec");
  std::printf("job_spec:\n%s", spec == c.metadata.end()
                                   ? "(not recorded: written by an older "
                                     "cohort)\n"
                                   : spec->second.c_str());
  const auto names = c.metadata.find("state_names");
  std::printf("state_names:\n%s\n",
              names == c.metadata.end() ? "null" : names->second.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunCheckpoint(const std::vector<std::string>& args, bool* help) {
  // Words not starting with "--" are the action and its directory; the rest
  // are flags (only --help today).
  std::vector<std::string> words, flag_args;
  for (const std::string& a : args) {
    (absl::StartsWith(a, "-") ? flag_args : words).push_back(a);
  }
  FlagSet flags("checkpoint");
  RETURN_IF_ERROR(flags.Parse(flag_args));
  if (flags.help_requested()) {
    std::fputs(kUsage, stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (words.empty()) {
    return absl::InvalidArgumentError(
        "an action is required: cohort checkpoint verify DIR, or cohort "
        "checkpoint show FILE");
  }
  if (words[0] == "show") {
    if (words.size() != 2 || words[1].empty()) {
      return absl::InvalidArgumentError(
          "show takes one checkpoint file: cohort checkpoint show FILE");
    }
    return Show(words[1]);
  }
  if (words[0] != "verify") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown action \"", words[0], "\" (actions: verify, show)"));
  }
  if (words.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("verify takes one directory, got ", words.size() - 1,
                     " arguments: cohort checkpoint verify DIR"));
  }
  if (words[1].empty()) {
    return absl::InvalidArgumentError("the directory name is empty");
  }
  return Verify(words[1]);
}

}  // namespace cohort
