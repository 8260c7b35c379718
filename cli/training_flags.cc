#include "cli/training_flags.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/model_commands.h"
#include "common/checkpoint.h"
#include "common/prometheus.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// The note a job's commands add where rank 0 alone acts on a flag.
std::string InJob(TrainingCommand c, const std::string& note) {
  return c == TrainingCommand::kTrain ? "" : absl::StrCat("; ", note);
}

std::string ReportHelp(TrainingCommand c) {
  constexpr char kRules[] =
      " (a new or regular file: a device, FIFO or symbolic link there is "
      "refused, as is a file the run reads)";
  switch (c) {
    case TrainingCommand::kTrain:
      return absl::StrCat("write the run's JSON report to this file", kRules);
    case TrainingCommand::kWorker:
      return absl::StrCat(
          "rank 0 writes its training result as JSON to this file (cohort "
          "train's keys; the coordinator's --report has the job's)",
          kRules);
    case TrainingCommand::kLocal:
    case TrainingCommand::kLaunch:
      return absl::StrCat(
          "write the job's JSON report here at the end (the coordinator's: "
          "cohort train's keys plus world_size, state and reason",
          c == TrainingCommand::kLaunch ? "; launch rank 0 writes it)" : ")",
          kRules);
  }
  return "";
}

std::string MetricsHelp(TrainingCommand c) {
  const char* what =
      c == TrainingCommand::kTrain ? "this run's Prometheus metrics at /metrics"
      : c == TrainingCommand::kLocal
          ? "the coordinator's dashboard at /, the job's Prometheus metrics "
            "at /metrics"
          : "this worker's Prometheus metrics at /metrics";
  return absl::StrCat(
      "HOST:PORT of a plaintext HTTP server with ", what,
      c == TrainingCommand::kLaunch
          ? " (each task's; --coordinator-metrics-listen: rank 0's "
            "coordinator)"
          : "",
      "; it needs no token and has no TLS, so bind it where only trusted "
      "readers reach, e.g. 127.0.0.1:9400");
}

}  // namespace

void TrainingFlags::Register(FlagSet& flags, TrainingCommand c) {
  flags.Int("epochs", &epochs,
            absl::StrCat("epochs to train (default: the spec's)",
                         c == TrainingCommand::kWorker
                             ? "; every worker of the job needs the same"
                             : ""));
  flags.Int("max-steps", &max_steps,
            absl::StrCat("stop after INT steps in all; 0 trains none (loads "
                         "or resumes, writes the final checkpoint, exports); "
                         "-1: no limit beyond the spec's max_steps (default: "
                         "-1)",
                         c == TrainingCommand::kWorker
                             ? "; every worker of the job needs the same"
                             : ""),
            -1);
  flags.String("checkpoint-dir", &checkpoint_dir,
               absl::StrCat("write checkpoints here and resume from the "
                            "newest (default: the spec's checkpoint.dir)",
                            InJob(c,
                                  "rank 0 writes them, and the workers "
                                  "resume from the newest any of them holds")),
               "DIR");
  flags.String("init-from", &init_from,
               absl::StrCat("start from the weights in this safetensors file "
                            "(PyTorch state_dict names; cohort export writes "
                            "one), unless a checkpoint is resumed",
                            InJob(c, "every worker reads it")),
               "FILE");
  flags.String("export", &export_to,
               absl::StrCat("after training, write the final model here: "
                            "FILE.onnx or FILE.safetensors (as cohort export "
                            "does; the same rules as --report)",
                            InJob(c,
                                  "rank 0 writes it, from its final "
                                  "checkpoint")),
               "FILE");
  flags.String("report", &report, ReportHelp(c), "FILE");
  flags.Bool("quiet", &quiet,
             c == TrainingCommand::kLocal
                 ? "no progress line (the workers' resume lines stay)"
                 : "no progress output (the resume line stays)");
  flags.String("metrics-listen", &metrics_listen, MetricsHelp(c), "HOST:PORT");
  flags.String("log-dir", &log_dir,
               absl::StrCat("write train.csv, eval.csv and a TensorBoard "
                            "event file here (default: the spec's log.dir)",
                            InJob(c, "rank 0 writes them")),
               "DIR");
}

absl::Status TrainingFlags::Check() const {
  if (export_to.empty() || !ExportFormat().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--export must name a .onnx or .safetensors file, got ", export_to));
}

std::string TrainingFlags::ExportFormat() const {
  if (absl::EndsWith(export_to, ".onnx")) return "onnx";
  if (absl::EndsWith(export_to, ".safetensors")) return "safetensors";
  return "";
}

std::vector<std::pair<std::string, std::string>> TrainingFlags::Outputs()
    const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!report.empty()) out.emplace_back("--report", report);
  if (!export_to.empty()) out.emplace_back("--export", export_to);
  return out;
}

void TrainingFlags::ApplyTo(TrainOptions* o) const {
  o->epochs = epochs;
  o->max_steps = max_steps;
  o->checkpoint_dir = checkpoint_dir;
  o->init_from = init_from;
  o->log_dir = log_dir;
  o->quiet = quiet;
}

void TrainingFlags::ApplyTo(WorkerOptions* o) const {
  o->epochs = epochs;
  o->max_steps = max_steps;
  o->checkpoint_dir = checkpoint_dir;
  o->init_from = init_from;
  o->log_dir = log_dir;
  o->quiet = quiet;
}

std::vector<std::string> TrainingFlags::WorkerArgs() const {
  std::vector<std::string> a;
  if (epochs >= 0) a.push_back(absl::StrCat("--epochs=", epochs));
  if (max_steps >= 0) a.push_back(absl::StrCat("--max-steps=", max_steps));
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{
                                        "checkpoint-dir", &checkpoint_dir},
                                    {"init-from", &init_from},
                                    {"export", &export_to}}) {
    if (!value->empty()) a.push_back(absl::StrCat("--", flag, "=", *value));
  }
  return a;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

absl::Status ScratchDir::Make() {
  char dir[] = "/tmp/cohort-export-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    return absl::InternalError(absl::StrCat(
        "--export: cannot make a temporary directory: ", std::strerror(errno)));
  }
  path_ = dir;
  return absl::OkStatus();
}

absl::Status WriteRunOutputs(const TrainingFlags& f, const TrainResult& result,
                             const std::string& checkpoint_dir) {
  if (!f.report.empty()) {
    absl::Status s = WriteReport(f.report, result);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--report: ", s.message()));
    }
  }
  if (f.export_to.empty()) return absl::OkStatus();
  // Not simply the newest file there: the directory may hold a newer,
  // damaged one the run skipped when it resumed.
  const std::string path =
      absl::StrCat(checkpoint_dir, "/", CheckpointFileName(result.steps));
  std::error_code ec;
  if (checkpoint_dir.empty() || !std::filesystem::exists(path, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--export: the run left no checkpoint ", path,
                     " (parameter-server jobs write none yet)"));
  }
  return ExportCheckpoint(path, f.ExportFormat(), f.export_to);
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeTrainingMetrics(
    const TrainingFlags& f, const WorkerMetrics* metrics) {
  if (f.metrics_listen.empty()) return nullptr;
  return ServeMetrics(f.metrics_listen, "--metrics-listen",
                      [metrics] { return metrics->Text(); });
}

}  // namespace cohort
