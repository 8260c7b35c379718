// `cohort train`: trains a job in this process (see worker/trainer.h).
#include "cli/train_command.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cli/devices.h"
#include "cli/flags.h"
#include "cli/output_paths.h"
#include "cli/stop_signal.h"
#include "cli/training_flags.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "worker/progress.h"
#include "worker/timeline.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

namespace cohort {
namespace {

struct TrainFlags {
  std::string job;
  std::string data_dir;
  std::string devices;
  std::string replicas;  // the older name of --devices
  int64_t threads = 0;
  std::string timeline;
  bool timeline_layers = false;
  TrainingFlags training;
};

void AddTrainFlags(FlagSet& flags, TrainFlags* f) {
  flags.String("job", &f->job, "job spec (.textproto); required", "FILE");
  flags.String("data-dir", &f->data_dir,
               "data set directory (default: the spec's data.dir)", "DIR");
  flags.String("devices", &f->devices,
               "cpu:N, gpu:all or gpu:I,J,... (default: every GPU if there "
               "is one, else cpu:1)",
               "DEVICES");
  flags.String("replicas", &f->replicas, "older name of --devices", "DEVICES");
  flags.Int("threads", &f->threads,
            "compute threads in all (default: one per replica)", 1, 1024);
  flags.String("timeline", &f->timeline,
               "write a Chrome trace of every step's phases to this file (the "
               "same rules as --report)",
               "FILE");
  flags.Bool("timeline-layers", &f->timeline_layers,
             "with --timeline: also each layer's forward and backward call "
             "(CPU devices)");
  f->training.Register(flags, TrainingCommand::kTrain);
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
  f.training.ApplyTo(&options);
  options.data_dir = f.data_dir;
  options.replicas = replicas;
  options.gpus = devices.gpus;
  options.threads = f.threads > 0 ? static_cast<int>(f.threads) : replicas;
  options.timeline_layers = f.timeline_layers;
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

// A run that resumed a finished job (or was told --max-steps=0) trained
// nothing, and its rate and loss would be zeros that read as a failure.
bool PrintNothingTrained(const TrainResult& r, int64_t max_steps_flag) {
  if (r.steps_this_run > 0) return false;
  if (max_steps_flag == 0) {
    std::printf(
        "result: no step trained (--max-steps=0); the model is %s\n",
        r.restored_step >= 0
            ? absl::StrCat("the checkpoint's at step ", r.restored_step).c_str()
            : "the starting one (the seed's, or --init-from)");
  } else if (r.restored_step >= 0) {
    std::printf(
        "nothing left to train: the checkpoint at step %lld already finished "
        "the job (raise --epochs or --max-steps to train on)\n",
        static_cast<long long>(r.restored_step));
  } else {
    return false;
  }
  std::fflush(stdout);
  return true;
}

void PrintTrainResult(const TrainResult& r, int64_t max_steps_flag) {
  if (PrintNothingTrained(r, max_steps_flag)) return;
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

// Every output flag checked before the work: writable, and none of the
// files the run reads (its spec, --init-from, its data set, names in its
// checkpoint directory) nor each other.
absl::Status CheckTrainOutputs(const TrainFlags& f, const JobSpec& spec) {
  CommandInputs inputs;
  inputs.files.emplace_back("the --job file", f.job);
  if (!f.training.init_from.empty()) {
    inputs.files.emplace_back("the --init-from file", f.training.init_from);
  } else if (!spec.init_from().empty()) {
    inputs.files.emplace_back("the spec's init_from file", spec.init_from());
  }
  inputs.AddDataSet(spec.data(), f.data_dir);
  const std::string& dir = !f.training.checkpoint_dir.empty()
                               ? f.training.checkpoint_dir
                               : spec.checkpoint().dir();
  if (!dir.empty()) inputs.checkpoint_dirs.push_back(dir);
  std::vector<std::pair<std::string, std::string>> outputs =
      f.training.Outputs();
  if (!f.timeline.empty()) outputs.emplace_back("--timeline", f.timeline);
  if (f.timeline_layers && f.timeline.empty()) {
    return absl::InvalidArgumentError(
        "--timeline-layers adds to a timeline: give --timeline=FILE too");
  }
  for (const auto& [flag, path] : outputs) {
    RETURN_IF_ERROR(CheckOutputFlag(flag, path, inputs));
  }
  return CheckDistinctOutputs(outputs);
}

// Trains with `options` (and --timeline), then writes the run's outputs.
absl::Status TrainAndWrite(const TrainFlags& f, const JobSpec& spec,
                           TrainOptions options, const Devices& devices) {
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
  PrintTrainResult(*run, f.training.max_steps);
  const std::string dir = !options.checkpoint_dir.empty()
                              ? options.checkpoint_dir
                              : spec.checkpoint().dir();
  return WriteRunOutputs(f.training, *run, dir);
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
  RETURN_IF_ERROR(f.training.Check());
  ASSIGN_OR_RETURN(const Devices devices,
                   ResolveDevices(f.devices, f.replicas));
  ASSIGN_OR_RETURN(JobSpec spec, LoadJobSpec(f.job));
  if (!f.training.log_dir.empty()) {
    spec.mutable_log()->set_dir(f.training.log_dir);
  }
  // Output paths are checked before the work, not after it.
  RETURN_IF_ERROR(CheckTrainOutputs(f, spec));
  TrainOptions options = MakeTrainOptions(f, devices);
  WorkerMetrics metrics;
  ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> metrics_server,
                   ServeTrainingMetrics(f.training, &metrics));
  if (metrics_server != nullptr) {
    options.on_progress = [&metrics](const WorkerProgress& p) {
      metrics.Update(p);
    };
  }
  // The export is made from the run's final checkpoint; without a
  // checkpoint directory, one in a temporary directory.
  ScratchDir scratch;
  if (!f.training.export_to.empty() && options.checkpoint_dir.empty() &&
      spec.checkpoint().dir().empty()) {
    RETURN_IF_ERROR(scratch.Make());
    options.checkpoint_dir = scratch.path();
  }
  return TrainAndWrite(f, spec, std::move(options), devices);
}

}  // namespace cohort
