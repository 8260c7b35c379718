// Training: one model replica per local device (CPU replicas or GPUs), data
// parallel, with the same mathematics as one replica with R times the batch.
//
// Replica r reads its own shard of every epoch (DistributedSampler, rank r
// of R) and runs forward and backward into its own gradient buffer; the
// gradients are averaged and every replica applies the same optimizer
// step. A worker of a multi-worker job (DistributedContext) also
// all-reduces the gradients with its peers, or, in parameter-server mode,
// pushes the local mean gradient to the shards and pulls back the
// parameters (the shards run the optimizer). The loop is written once
// (worker/training_loop.h) over a device engine (worker/engine/) and a
// gradient exchange (worker/exchange/).
//
// Thread safety: Train() may run concurrently with other Train() calls; it
// shares nothing.
#ifndef COHORT_WORKER_TRAINER_H_
#define COHORT_WORKER_TRAINER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "proto/job.pb.h"
#include "worker/exchange/ps_connect.h"

namespace cohort {

class Communicator;
class NcclCommunicator;
class Timeline;
class Metric;
class WorkerProgress;

// What a worker of a multi-worker job adds to local training. The trainer
// stays free of RPC: the worker process fills these in from its
// coordinator. Everything borrowed must outlive the trainer.
struct DistributedContext {
  int rank = 0;
  int world_size = 1;
  int replica_offset = 0;        // global index of this worker's first replica
  int total_replicas = 1;        // over all workers
  Communicator* comm = nullptr;  // cross-worker all-reduce (CPU workers)
  // GPU workers: communicators over every GPU of the job (see
  // worker/comm/nccl_communicator.h); replaces `comm`.
  NcclCommunicator* nccl = nullptr;
  int64_t bucket_bytes = 25 << 20;
  // The sampler seed of `epoch` (the coordinator's).
  std::function<absl::StatusOr<uint64_t>(int64_t epoch)> epoch_seed;
  // With this worker's progress, at most every 100 ms between steps, and
  // always before an evaluation (which waits for the other workers); an
  // error stops training (the job failed or was stopped elsewhere).
  std::function<absl::Status(const WorkerProgress&)> on_step;

  // Parameter-server mode (JobSpec.mode PS): the shards hold the parameters
  // and run the optimizer, so there is no gradient all-reduce and no local
  // optimizer step. `comm` is still needed: BatchNorm buffers and
  // evaluation sums are combined over workers with it.
  bool ps_mode = false;
  // Connects to the shards once the model's parameter sizes are known
  // (worker/exchange/ps_exchange.h).
  PsConnect ps_connect;
  // SSP and ASYNC share each epoch's data: its chunks (one replica batch
  // each, the batches the distributed sampler gives the job's replicas,
  // numbered step * total_replicas + replica) are claimed in order by
  // whichever worker is free. Claims `count` chunks of `epoch` and returns
  // the first one's number; numbers past the epoch's chunks mean the epoch
  // is used up.
  std::function<absl::StatusOr<int64_t>(int64_t epoch, int count)> claim_chunks;
};

struct ElasticState;

struct TrainOptions {
  std::string data_dir;  // overrides the spec's data directory
  int64_t epochs = -1;   // >= 0 overrides the spec
  // >= 0 overrides the spec: at most this many steps in all, 0 none at all
  // (load, resume, and write the final checkpoint); -1: the spec's.
  int64_t max_steps = -1;
  int replicas = 1;  // local CPU replicas
  // CUDA devices to train on, one replica each (worker/gpu/gpu_engine.h);
  // empty: CPU replicas.
  std::vector<int> gpus;
  int threads = 1;  // compute threads in all (BLAS), >= replicas
  // Progress: a live single line (terminal) or a log line every
  // `log_every_seconds` (otherwise). Nothing when quiet.
  bool live_progress = false;
  bool quiet = false;
  double log_every_seconds = 5.0;
  // If set, receives the trained parameters (flat, as the model stores them).
  std::vector<float>* final_parameters = nullptr;
  // Set for a worker of a multi-worker job; null for a single process.
  const DistributedContext* distributed = nullptr;
  // >= 1. After each step's forward and backward, sleeps (slowdown - 1)
  // times as long as they took, so that this process runs `slowdown` times
  // slower: a straggler, for studying how a job copes with one.
  double slowdown = 1.0;
  // Overrides the spec's checkpoint.dir (which then needs an interval).
  std::string checkpoint_dir;
  // Overrides the spec's log.dir: where the chief writes train.csv,
  // eval.csv and TensorBoard events.
  std::string log_dir;
  // Starting weights (parameters and BatchNorm statistics) from a
  // safetensors file with PyTorch's state_dict names (cohort export writes
  // one; so can PyTorch), unless a checkpoint is resumed. Empty: the seed's
  // initialisation.
  std::string init_from;
  // > 0: stop once this many steps have run in this call, as an
  // interruption would (no final evaluation): for resume tests and chaos
  // tools.
  int64_t stop_after_steps = 0;
  // >= 0. Each step's forward and backward take at least this long (the
  // step sleeps the rest; slowdown multiplies the result). Makes workers
  // that share a few cores behave like workers on machines of their own,
  // whose speed does not change when a peer sleeps.
  double min_step_seconds = 0;
  // A worker of an elastic job (all-reduce, CPU): what it carries from one
  // generation to the next (ElasticState). Borrowed; null otherwise.
  ElasticState* elastic = nullptr;
  // Receives a timeline of every step's phases (worker/timeline.h).
  // Borrowed; null: none.
  Timeline* timeline = nullptr;
  // With a timeline: also each layer's forward and backward (CPU engine;
  // worker/layer_timeline.h).
  bool timeline_layers = false;
  // Bytes this process may still allocate, for the check Create() makes
  // before allocating anything: the job's estimated memory
  // (common/memory_estimate.h) must fit. -1: read the machine's
  // (common/machine_memory.h).
  int64_t available_memory = -1;
  // Set (by a signal handler) when the process must stop: training ends
  // after the step in flight, a process that writes checkpoints writes a
  // final one of that step, and Run() returns CANCELLED saying so.
  // Borrowed; null: never.
  const std::atomic<bool>* stop_signal = nullptr;
  // Receives the progress a worker sends its coordinator, at most every
  // 100 ms (a single process's --metrics-listen). Empty: none.
  std::function<void(const WorkerProgress&)> on_progress;
};

struct EpochResult {
  int64_t epoch = 0;
  int64_t steps = 0;
  double train_loss = 0;      // mean over the epoch's steps
  double train_accuracy = 0;  // classification only
  double test_loss = -1;      // -1: not evaluated
  double test_accuracy = -1;  // -1: not evaluated, or not a classification
  // Every metric of the evaluation, loss first (worker/objective.h): loss,
  // accuracy, top5_accuracy for classes; loss, mse, mae, r2 for regression;
  // loss, accuracy, auc, normalized_entropy for BCE_WITH_LOGITS on one
  // target.
  std::vector<std::pair<std::string, double>> test_metrics;
  double seconds = 0;  // training time of the epoch (no evaluation)
  // Since training began, at the end of this epoch's evaluation.
  double wall_seconds = 0;
};

struct TrainResult {
  std::string job_name;
  std::string model;
  int64_t parameters = 0;
  int replicas = 1;
  int threads = 1;
  int64_t steps = 0;
  // Of them, the steps this run took; the rest came with the state it
  // resumed from, at restored_step (-1: a fresh start).
  int64_t steps_this_run = 0;
  int64_t restored_step = -1;
  int64_t epochs = 0;        // epochs begun (a max_steps stop may cut one)
  int64_t samples = 0;       // training samples processed
  double train_seconds = 0;  // training steps only (no evaluation)
  double eval_seconds = 0;
  double setup_seconds = 0;   // data loading and model construction
  double samples_per_s = 0;   // samples / train_seconds
  double final_loss = 0;      // mean training loss of the last steps
  double test_accuracy = -1;  // last evaluation; -1 if none
  double test_loss = -1;
  std::vector<std::pair<std::string, double>> test_metrics;  // last one
  // Steps whose gradient was not finite and were skipped
  // (nonfinite_gradients: NONFINITE_SKIP).
  int64_t skipped_steps = 0;
  // Samples that failed to read and were replaced (skip_bad_samples).
  int64_t skipped_samples = 0;
  std::vector<EpochResult> epoch_results;
  // Validation-driven control (eval.metric): whether patience ran out, and
  // the best evaluation over the whole run (best_step -1: none).
  bool stopped_early = false;
  std::string best_metric_name;
  double best_metric = 0;
  int64_t best_step = -1;
  // The learning rate of the last step (schedule and
  // optimizer.scale_lr_with_world applied); -1: no step taken.
  double final_lr = -1;
};

// What an elastic worker keeps across generations. When a generation ends
// under it (a peer failed, or the world changes), the trainer saves its
// state after its last completed step here. The next generation's trainer
// agrees with its peers on the newest state any of them holds (this, or a
// checkpoint file), takes it from the rank that holds it, and trains the
// rest of the epoch over the new world (DistributedSampler::IndicesFrom).
struct ElasticState {
  // The parameters, optimizer state and sampler position after
  // snapshot->step; empty until a generation ended under this worker.
  std::optional<Checkpoint> snapshot;
  // Training done in earlier generations (samples, training time, epoch
  // results), added to the last generation's result.
  TrainResult carried;
  // The epoch a generation ended in, as far as it got: its loss sum,
  // correct and seen counts over `steps` steps, so that the epoch's
  // figures cover all of it once a later generation finishes it.
  struct PartialEpoch {
    int64_t epoch = -1;
    int64_t steps = 0;
    double loss_sum = 0;
    int64_t correct = 0;
    int64_t seen = 0;
  };
  PartialEpoch partial;
  // The exchange's state after `exchange_step` (GradientExchange::SaveState).
  std::vector<float> exchange_state;
  int64_t exchange_step = -1;
};

// Fills the totals every trainer reports the same way at the end of Run():
// steps, samples/s over the training time, and the final loss as the mean
// of the last (up to) 100 step losses.
inline void FinishResult(int64_t steps, const std::vector<double>& losses,
                         TrainResult* result) {
  result->steps = steps;
  result->samples_per_s =
      result->train_seconds > 0 ? result->samples / result->train_seconds : 0;
  const size_t tail = std::min<size_t>(losses.size(), 100);
  double sum = 0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) {
    sum += losses[i];
  }
  result->final_loss = tail > 0 ? sum / tail : 0;
}

// `metrics` appended to a proto list of Metric.
void AddMetrics(const std::vector<std::pair<std::string, double>>& metrics,
                google::protobuf::RepeatedPtrField<Metric>* out);

// The progress fields every trainer reports the same way: step, epoch,
// loss, samples/s, the newest finished epoch's test metrics and the
// samples skipped so far.
void FillProgress(int64_t step, int64_t epoch, double loss,
                  double samples_per_s, const TrainResult& result,
                  WorkerProgress* p);

// A prepared training run: data loaded, models built and checked against
// the data. Create() does everything that can fail because of the user's
// input, so a caller can report such errors before training starts. It
// first checks that the job fits this machine's memory (FAILED_PRECONDITION
// naming the layer or data set that needs the most, and what the machine
// has), so that an oversized model is refused, not killed mid-allocation.
class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const JobSpec& spec, const TrainOptions& options);
  virtual ~Trainer() = default;
  // Trains to the end (epochs or max_steps). Call once.
  virtual absl::StatusOr<TrainResult> Run() = 0;
};

// Create() and Run().
absl::StatusOr<TrainResult> Train(const JobSpec& spec,
                                  const TrainOptions& options);

// The result as JSON (samples_per_s, train_seconds, test_accuracy,
// final_loss, steps, epochs, ... and per-epoch results).
std::string ReportJson(const TrainResult& result);

// Writes ReportJson to `path` atomically (temporary file, fsync, rename), so
// a reader never sees half a report.
absl::Status WriteReport(const std::string& path, const TrainResult& result);

}  // namespace cohort

#endif  // COHORT_WORKER_TRAINER_H_
