// The training flags that `cohort train`, `local`, `worker` and `launch`
// share: --epochs, --max-steps, --checkpoint-dir, --init-from, --export,
// --report, --quiet, --metrics-listen and --log-dir. Registered by one
// function, so every command gets the same names, help and checks, and applied
// by one struct. A command that cannot honour a flag as a single process does
// says so in its help and does the sensible thing: in a job, rank 0 alone
// writes the report and the export, and `local` and `launch` give the flags to
// every worker (their --report is the coordinator's job report).
//
// To add a flag to all four commands: a field here, a line in Register, and
// where it goes in ApplyTo and WorkerArgs.
//
// Thread safety: plain values; functions without shared state.
#ifndef COHORT_CLI_TRAINING_FLAGS_H_
#define COHORT_CLI_TRAINING_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "common/http_server.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"
#include "worker/worker_process.h"

namespace cohort {

// Which command registers the flags; it decides the help's notes.
enum class TrainingCommand { kTrain, kLocal, kWorker, kLaunch };

// The shared flags' names, as every command spells them.
inline constexpr const char* kTrainingFlagNames[] = {
    "epochs", "max-steps", "checkpoint-dir", "init-from", "export",
    "report", "quiet",     "metrics-listen", "log-dir"};

struct TrainingFlags {
  int64_t epochs = -1;     // -1: the spec's
  int64_t max_steps = -1;  // -1: the spec's (none if it has none); 0: none
  std::string checkpoint_dir;
  std::string init_from;
  std::string export_to;  // FILE.onnx or FILE.safetensors
  std::string report;
  std::string metrics_listen;
  std::string log_dir;
  bool quiet = false;

  // Registers the flags into `flags`, with `command`'s notes.
  void Register(FlagSet& flags, TrainingCommand command);
  // What needs no file: --export's format. INVALID_ARGUMENT naming it.
  absl::Status Check() const;
  // "onnx" or "safetensors" from --export's name ("" without --export).
  std::string ExportFormat() const;
  // The output flags given, {flag, path}, for CheckOutputFlag.
  std::vector<std::pair<std::string, std::string>> Outputs() const;

  void ApplyTo(TrainOptions* o) const;
  void ApplyTo(WorkerOptions* o) const;
  // The flags a worker process of `cohort local` is given: those set of
  // --epochs, --max-steps, --checkpoint-dir, --init-from and --export
  // (--report and --metrics-listen are the coordinator's there, and local's
  // workers are always quiet).
  std::vector<std::string> WorkerArgs() const;
};

// A temporary directory, removed with this, for the final checkpoint that
// --export is made from when a run has no checkpoint directory.
class ScratchDir {
 public:
  ScratchDir() = default;
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  // Makes the directory; INTERNAL naming errno when it cannot.
  absl::Status Make();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// After a run that finished: --report (the run's JSON) and --export (the
// model of the final checkpoint, of step result.steps, in `checkpoint_dir`).
absl::Status WriteRunOutputs(const TrainingFlags& f, const TrainResult& result,
                             const std::string& checkpoint_dir);

// Serves `metrics` at /metrics on --metrics-listen (null without it).
absl::StatusOr<std::unique_ptr<HttpServer>> ServeTrainingMetrics(
    const TrainingFlags& f, const WorkerMetrics* metrics);

}  // namespace cohort

#endif  // COHORT_CLI_TRAINING_FLAGS_H_
