// `cohort train`: trains a job in this process (see worker/trainer.h).
#include "cli/train_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "cli/devices.h"
#include "cli/flags.h"
#include "cli/model_commands.h"
#include "cli/output_paths.h"
#include "cli/stop_signal.h"
#include "common/checkpoint.h"
#include "common/files.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "worker/progress.h"
#include "worker/timeline.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

struct TrainFlags {
  std::string job;
  std::string data_dir;
  int64_t epochs = -1;
  int64_t max_steps = -1;
  std::string devices;
  std::string replicas;  // the older name of --devices
  int64_t threads = 0;
  std::string report;
  std::string checkpoint_dir;
  std::string init_from;
  std::string export_to;
  std::string timeline;
  bool quiet = false;
  std::string log_dir;
};

void AddTrainFlags(FlagSet& flags, TrainFlags* f) {
  flags.String("job", &f->job, "job spec (.textproto); required");
  flags.String("data-dir", &f->data_dir,
               "data set directory (overrides the spec)");
  flags.Int("epochs", &f->epochs, "epochs (overrides the spec)");
  flags.Int("max-steps", &f->max_steps,
            "stop after N steps (overrides the spec)");
  flags.String("devices", &f->devices,
               "cpu:N, gpu:all or gpu:I,J,... (default: every GPU if there "
               "is one, else cpu:1)");
  flags.String("replicas", &f->replicas, "older name of --devices");
  flags.Int("threads", &f->threads,
            "compute threads in all (default: one per replica)", 1, 1024);
  flags.String("report", &f->report,
               "write a JSON report to this file (a new or regular file: a "
               "device, FIFO or symbolic link there is refused, as is a file "
               "the run reads)");
  flags.String("export", &f->export_to,
               "after training, write the final model here: FILE.onnx or "
               "FILE.safetensors (as cohort export does; the same rules as "
               "--report)");
  flags.String("init-from", &f->init_from,
               "start from the weights in this safetensors file (PyTorch "
               "state_dict names; cohort export writes one), unless a "
               "checkpoint is resumed");
  flags.String("checkpoint-dir", &f->checkpoint_dir,
               "write checkpoints here and resume from the newest (overrides "
               "the spec's checkpoint.dir)");
  flags.String("timeline", &f->timeline,
               "write a Chrome trace of every step's phases to this file (the "
               "same rules as --report)");
  flags.Bool("quiet", &f->quiet, "no progress output");
  flags.String("log-dir", &f->log_dir,
               "write train.csv, eval.csv and a TensorBoard event file here "
               "(overrides the spec's log.dir)");
}

// `s`, a failure to use the file flag `flag` names, saying so.
absl::Status FlagError(absl::string_view flag, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(flag, ": ", s.message()));
}

// The trainer's options from the flags, with SIGINT/SIGTERM installed to
// stop it at a step boundary.
TrainOptions MakeTrainOptions(const TrainFlags& f, const Devices& devices) {
  const int replicas = devices.replicas();
  TrainOptions options;
  options.data_dir = f.data_dir;
  options.epochs = f.epochs;
  options.max_steps = f.max_steps;
  options.replicas = replicas;
  options.gpus = devices.gpus;
  options.threads = f.threads > 0 ? static_cast<int>(f.threads) : replicas;
  options.quiet = f.quiet;
  options.checkpoint_dir = f.checkpoint_dir;
  options.init_from = f.init_from;
  options.live_progress = isatty(STDERR_FILENO);
  options.stop_signal = InstallStopSignal();
  return options;
}

// The --timeline recorder (null without the flag). An empty trace is
// written first: a path that cannot be written is refused now, not after
// the training it was to record.
absl::StatusOr<std::unique_ptr<Timeline>> OpenTimeline(
    const std::string& path) {
  if (path.empty()) return nullptr;
  auto timeline = std::make_unique<Timeline>(0, "cohort train");
  absl::Status s = timeline->Write(path);
  if (!s.ok()) return FlagError("--timeline", s);
  return timeline;
}

void PrintTrainResult(const TrainResult& r) {
  std::printf(
      "result: steps %lld | epochs %lld | %.0f samples/s | train %.2fs | "
      "final loss %.4f",
      static_cast<long long>(r.steps), static_cast<long long>(r.epochs),
      r.samples_per_s, r.train_seconds, r.final_loss);
  std::printf("%s\n", FormatTestMetrics(r.test_metrics).c_str());
  if (r.best_step >= 0) {
    std::printf("best: %s %.6g at step %lld%s\n", r.best_metric_name.c_str(),
                r.best_metric, static_cast<long long>(r.best_step),
                r.stopped_early ? " | stopped early" : "");
  }
  std::fflush(stdout);
}

}  // namespace

namespace {

// "onnx" or "safetensors", from --export's file name.
absl::StatusOr<std::string> ExportFormat(const std::string& path) {
  if (absl::EndsWith(path, ".onnx")) return std::string("onnx");
  if (absl::EndsWith(path, ".safetensors")) return std::string("safetensors");
  return absl::InvalidArgumentError(absl::StrCat(
      "--export must name a .onnx or .safetensors file, got ", path));
}

// The run's final checkpoint (at its last step) in `dir`, exported. Not
// simply the newest file there: the directory may hold a newer, damaged one
// the run skipped when it resumed.
absl::Status ExportFinal(const std::string& dir, int64_t step,
                         const std::string& format, const std::string& out) {
  const std::string path = absl::StrCat(dir, "/", CheckpointFileName(step));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--export: the run left no checkpoint ", path,
                     " (parameter-server jobs write none yet)"));
  }
  return ExportCheckpoint(path, format, out);
}

// Every output flag checked before the work: writable, and none of the
// files the run reads (its spec, --init-from, its data set, names in its
// checkpoint directory) nor each other.
absl::Status CheckTrainOutputs(const TrainFlags& f, const JobSpec& spec) {
  CommandInputs inputs;
  inputs.files.emplace_back("the --job file", f.job);
  if (!f.init_from.empty()) {
    inputs.files.emplace_back("the --init-from file", f.init_from);
  }
  inputs.AddDataSet(spec.data(), f.data_dir);
  const std::string& dir =
      !f.checkpoint_dir.empty() ? f.checkpoint_dir : spec.checkpoint().dir();
  if (!dir.empty()) inputs.checkpoint_dirs.push_back(dir);
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"--report", f.report},
      {"--timeline", f.timeline},
      {"--export", f.export_to}};
  for (const auto& [flag, path] : outputs) {
    if (!path.empty()) RETURN_IF_ERROR(CheckOutputFlag(flag, path, inputs));
  }
  return CheckDistinctOutputs(outputs);
}

}  // namespace

absl::Status RunTrain(const std::vector<std::string>& args, bool* help) {
  TrainFlags f;
  FlagSet flags("train");
  AddTrainFlags(flags, &f);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (f.job.empty()) {
    return absl::InvalidArgumentError("--job=FILE is required");
  }
  ASSIGN_OR_RETURN(const Devices devices,
                   ResolveDevices(f.devices, f.replicas));
  ASSIGN_OR_RETURN(JobSpec spec, LoadJobSpec(f.job));
  if (!f.log_dir.empty()) spec.mutable_log()->set_dir(f.log_dir);
  // Output paths are checked before the work, not after it.
  std::string export_format;
  if (!f.export_to.empty()) {
    ASSIGN_OR_RETURN(export_format, ExportFormat(f.export_to));
  }
  RETURN_IF_ERROR(CheckTrainOutputs(f, spec));
  TrainOptions options = MakeTrainOptions(f, devices);
  // The export is made from the run's final checkpoint; without a
  // checkpoint directory, one in a temporary directory.
  std::string scratch;
  if (!f.export_to.empty() && options.checkpoint_dir.empty() &&
      spec.checkpoint().dir().empty()) {
    char dir[] = "/tmp/cohort-export-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      return absl::InternalError(
          absl::StrCat("--export: cannot make a temporary directory: ",
                       std::strerror(errno)));
    }
    scratch = options.checkpoint_dir = dir;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Timeline> timeline,
                   OpenTimeline(f.timeline));
  options.timeline = timeline.get();
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                   Trainer::Create(spec, options));
  if (!options.quiet) {
    std::fprintf(stderr, "cohort train: %s | devices %s | threads %d\n",
                 DescribeJobSpec(spec).c_str(), devices.ToString().c_str(),
                 options.threads);
  }
  absl::StatusOr<TrainResult> run = trainer->Run();
  if (timeline != nullptr) {
    absl::Status s = timeline->Write(f.timeline);
    if (!s.ok() && run.ok()) return FlagError("--timeline", s);
  }
  if (!run.ok()) return run.status();
  PrintTrainResult(*run);
  if (!f.report.empty()) {
    absl::Status s = WriteReport(f.report, *run);
    if (!s.ok()) return FlagError("--report", s);
  }
  if (f.export_to.empty()) return absl::OkStatus();
  const std::string dir = !options.checkpoint_dir.empty()
                              ? options.checkpoint_dir
                              : spec.checkpoint().dir();
  absl::Status exported =
      ExportFinal(dir, run->steps, export_format, f.export_to);
  if (!scratch.empty()) std::filesystem::remove_all(scratch);
  return exported;
}

}  // namespace cohort
