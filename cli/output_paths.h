// The output flags of the cohort commands, checked before the command does
// its work: each path must be writable (common/files.h CheckCanWriteFile: a
// new or regular file, never a device, FIFO, socket, directory or symbolic
// link, in a directory a file can be created in) and must not be one of the
// files the command reads, which writing it would destroy.
//
// Files are compared by identity (device and inode), so another spelling,
// a symbolic link or a hard link of an input is caught too.
//
// Thread safety: plain values and functions without shared state.
#ifndef COHORT_CLI_OUTPUT_PATHS_H_
#define COHORT_CLI_OUTPUT_PATHS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace cohort {

// What a command reads.
struct CommandInputs {
  // {what, path}: {"the --input file", "x.npy"}.
  std::vector<std::pair<std::string, std::string>> files;
  // Checkpoint directories: a file there named like a checkpoint
  // (ckpt-<step>.cohort) would be taken for one, so no output may have such
  // a name in one.
  std::vector<std::string> checkpoint_dirs;
  // Directories a data set owns whole (MNIST, CIFAR-10, an image folder):
  // no file already in them may be replaced.
  std::vector<std::string> data_dirs;

  // --checkpoint=PATH: a checkpoint file (and its directory), or a
  // checkpoint directory.
  void AddCheckpoint(const std::string& path);
  // The files of `data` (paths relative to `dir_override`, or else to
  // data.dir, as the loaders resolve them).
  void AddDataSet(const DatasetSpec& data, const std::string& dir_override);
};

// OK when the output flag `flag` may write `out`; otherwise
// InvalidArgument "FLAG: reason", one line.
absl::Status CheckOutputFlag(absl::string_view flag, const std::string& out,
                             const CommandInputs& inputs);

// InvalidArgument when two of `outputs` ({flag, path}, empty paths
// ignored) name the same file: the later write would replace the earlier.
absl::Status CheckDistinctOutputs(
    const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace cohort

#endif  // COHORT_CLI_OUTPUT_PATHS_H_
