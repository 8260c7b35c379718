#include "cli/output_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Base(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `file` as the data loaders resolve it: relative to `dir` unless absolute.
std::string InDir(const std::string& dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || dir.empty()) return file;
  return absl::StrCat(dir, "/", file);
}

// Whether `a` and `b` name the same directory entry, whether or not it
// exists yet: the same file, or the same name in the same directory.
bool SameEntry(const std::string& a, const std::string& b) {
  if (SameFile(a, b)) return true;
  return !Base(a).empty() && Base(a) == Base(b) &&
         SameFile(Parent(a), Parent(b));
}

// Whether the existing file `path` lies somewhere under the directory `dir`.
bool Inside(const std::string& path, const std::string& dir) {
  std::error_code ec;
  const fs::path file = fs::canonical(path, ec);
  if (ec) return false;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return false;
  return std::mismatch(root.begin(), root.end(), file.begin(), file.end())
             .first == root.end();
}

// Committed checkpoints ("ckpt-<step>.cohort"), the names `cohort
// checkpoint verify` lists and writers' temp files ("...cohort.tmp-PID",
// which retention deletes).
bool NamedLikeACheckpoint(const std::string& name) {
  return absl::StartsWith(name, "ckpt-") &&
         (absl::EndsWith(name, ".cohort") ||
          absl::StrContains(name, ".cohort.tmp-"));
}

absl::Status Refused(absl::string_view flag, const std::string& out,
                     absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": ", out, " ", why, "; write the output elsewhere"));
}

}  // namespace

void CommandInputs::AddCheckpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    checkpoint_dirs.push_back(path);
    return;
  }
  files.emplace_back("the --checkpoint file", path);
  checkpoint_dirs.push_back(Parent(path));
}

void CommandInputs::AddDataSet(const DatasetSpec& data,
                               const std::string& dir_override) {
  const std::string& dir = dir_override.empty() ? data.dir() : dir_override;
  auto add = [&](absl::string_view field, std::string file) {
    // "F.npz:NAME" is a member of the archive F.npz.
    const size_t member = file.find(".npz:");
    if (member != std::string::npos) file.resize(member + 4);
    if (file.empty()) return;
    files.emplace_back(absl::StrCat("a file of the data set (", field, ")"),
                       InDir(dir, file));
  };
  const NumpySpec& n = data.numpy();
  const CsvSpec& c = data.csv();
  switch (data.kind()) {
    case DatasetSpec::NUMPY:
      for (const std::string& f : n.train_x()) add("data.numpy.train_x", f);
      for (const std::string& f : n.train_y()) add("data.numpy.train_y", f);
      for (const std::string& f : n.test_x()) add("data.numpy.test_x", f);
      for (const std::string& f : n.test_y()) add("data.numpy.test_y", f);
      break;
    case DatasetSpec::CSV:
      for (const std::string& f : c.train()) add("data.csv.train", f);
      for (const std::string& f : c.test()) add("data.csv.test", f);
      break;
    case DatasetSpec::TOKENS:
      add("data.tokens.train", data.tokens().train());
      add("data.tokens.test", data.tokens().test());
      break;
    case DatasetSpec::CRITEO:
      for (const std::string& f : data.criteo().train()) {
        add("data.criteo.train", f);
      }
      for (const std::string& f : data.criteo().test()) {
        add("data.criteo.test", f);
      }
      break;
    case DatasetSpec::MNIST:
    case DatasetSpec::CIFAR10:
    case DatasetSpec::IMAGE_FOLDER:
      if (!dir.empty()) data_dirs.push_back(dir);
      break;
    default:
      break;
  }
}

absl::Status CheckOutputFlag(absl::string_view flag, const std::string& out,
                             const CommandInputs& inputs) {
  if (absl::Status s = CheckCanWriteFile(out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", s.message()));
  }
  for (const auto& [what, path] : inputs.files) {
    if (SameFile(out, path)) {
      return Refused(flag, out,
                     absl::StrCat("is ", what, ", which this command reads"));
    }
  }
  for (const std::string& dir : inputs.checkpoint_dirs) {
    if (NamedLikeACheckpoint(Base(out)) && SameFile(Parent(out), dir)) {
      return Refused(flag, out,
                     absl::StrCat("is named like a checkpoint in ", dir,
                                  ", the checkpoint directory this command "
                                  "reads, and would be taken for one"));
    }
  }
  for (const std::string& dir : inputs.data_dirs) {
    if (Inside(out, dir)) {
      return Refused(flag, out,
                     absl::StrCat("is a file of the data set in ", dir,
                                  ", which this command reads"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDistinctOutputs(
    const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const auto& [a_flag, a] = outputs[j];
      const auto& [b_flag, b] = outputs[i];
      if (a.empty() || b.empty() || !SameEntry(a, b)) continue;
      return absl::InvalidArgumentError(
          absl::StrCat(b_flag, ": ", b, " is also the file of ", a_flag,
                       "; give each output its own file"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
