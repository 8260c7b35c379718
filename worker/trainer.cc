// Trainer::Create: checks the options, then runs the one training loop
// (worker/training_loop.h) over the CPU engine or, for GPUs, the GPU
// plugin's engine.
#include "worker/trainer.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/machine_memory.h"
#include "common/memory_estimate.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "proto/coordinator.pb.h"
#include "worker/engine/cpu_engine.h"
#include "worker/gpu/gpu_plugin.h"
#include "worker/training_loop.h"

namespace cohort {
namespace {

absl::Status CheckOptions(const JobSpec& spec, const TrainOptions& options) {
  if (options.gpus.empty() && spec.precision() == BF16) {
    return absl::InvalidArgumentError(
        "precision: BF16 is for GPU devices (--devices=gpu:all or gpu:I,J); "
        "CPU replicas train in FP32: remove the precision line or set FP32");
  }
  if (options.replicas < 1) {
    return absl::InvalidArgumentError("replicas must be at least 1");
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError("threads must be at least 1");
  }
  if (!(options.slowdown >= 1.0)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "slowdown must be at least 1 (1: full speed), got ", options.slowdown));
  }
  const DistributedContext* d = options.distributed;
  if (d != nullptr && d->ps_mode && !d->ps_connect) {
    return absl::InvalidArgumentError("parameter-server mode needs ps_connect");
  }
  if (d != nullptr && d->ps_mode && spec.ps().consistency() != SYNC &&
      !d->claim_chunks) {
    return absl::InvalidArgumentError(
        "SSP and ASYNC parameter-server modes need claim_chunks");
  }
  if (options.timeline_layers && options.timeline == nullptr) {
    return absl::InvalidArgumentError(
        "--timeline-layers adds to a timeline: give --timeline=FILE too");
  }
  if (options.timeline_layers && !options.gpus.empty()) {
    return absl::InvalidArgumentError(
        "--timeline-layers times the CPU engine's layers; on GPUs the "
        "layers run asynchronously on streams, so use --timeline alone");
  }
  if (!(options.min_step_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_step_seconds must be >= 0, got ", options.min_step_seconds));
  }
  return absl::OkStatus();
}

// Refuses a job whose parameters, activations and data cannot fit in this
// machine's memory before any of it is allocated. An elastic worker that
// regroups already holds the job's state, which a fresh reading of the
// machine would count twice: it was checked in its first generation.
absl::Status CheckMemory(const JobSpec& spec, const TrainOptions& options) {
  if (options.elastic != nullptr && options.elastic->snapshot.has_value()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const ModelSizes sizes, InferJobModelSizes(spec));
  WorkerMemoryOptions w;
  w.gpus = !options.gpus.empty();
  w.replicas =
      w.gpus ? static_cast<int>(options.gpus.size()) : options.replicas;
  w.total_replicas = options.distributed != nullptr
                         ? options.distributed->total_replicas
                         : w.replicas;
  w.checkpoints =
      !options.checkpoint_dir.empty() || !spec.checkpoint().dir().empty();
  AvailableMemory available{options.available_memory,
                            "TrainOptions.available_memory"};
  if (options.available_memory < 0) {
    absl::StatusOr<AvailableMemory> detected = DetectAvailableMemory();
    if (!detected.ok()) return absl::OkStatus();  // nothing to compare with
    available = *detected;
  }
  return CheckMemoryFits(EstimateWorkerMemory(spec, sizes, w), available,
                         "this process");
}

}  // namespace

void AddMetrics(const std::vector<std::pair<std::string, double>>& metrics,
                google::protobuf::RepeatedPtrField<Metric>* out) {
  for (const auto& [name, value] : metrics) {
    Metric* m = out->Add();
    m->set_name(name);
    m->set_value(value);
  }
}

void FillProgress(int64_t step, int64_t epoch, double loss,
                  double samples_per_s, const TrainResult& result,
                  WorkerProgress* p) {
  p->set_step(step);
  p->set_epoch(epoch);
  p->set_loss(loss);
  p->set_samples_per_s(samples_per_s);
  if (!result.epoch_results.empty()) {
    const EpochResult& last = result.epoch_results.back();
    p->set_finished_epoch(last.epoch + 1);
    p->set_finished_epoch_test_accuracy(last.test_accuracy);
    AddMetrics(last.test_metrics, p->mutable_finished_epoch_test_metrics());
  }
  p->set_skipped_samples(result.skipped_samples);
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const JobSpec& spec, const TrainOptions& options) {
  RETURN_IF_ERROR(CheckOptions(spec, options));
  RETURN_IF_ERROR(CheckMemory(spec, options));
  EngineFactory make_engine = CreateCpuEngine;
  if (!options.gpus.empty()) {
    ASSIGN_OR_RETURN(const GpuPluginApi* gpu, LoadGpuPlugin());
    make_engine = gpu->create_engine;
  }
  JobSpec effective = spec;  // the loop keeps its own copy
  if (!options.log_dir.empty()) {
    effective.mutable_log()->set_dir(options.log_dir);
  }
  auto loop = std::make_unique<TrainingLoop>(effective, options);
  RETURN_IF_ERROR(loop->Setup(make_engine));
  return loop;
}

absl::StatusOr<TrainResult> Train(const JobSpec& spec,
                                  const TrainOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                   Trainer::Create(spec, options));
  return trainer->Run();
}

}  // namespace cohort
