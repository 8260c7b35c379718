// The one training loop, for every device and every mode: epochs and
// steps, the distributed sampler or a shared epoch's chunks, the learning
// rate schedule, the gradient exchange, the optimizer or the shards'
// parameters, the non-finite gradient policy, evaluation cadence,
// progress and reports to the coordinator, the chief's training logs
// (worker/loop/training_log.h), checkpoints and exact resume,
// the final checkpoint on a termination signal, the elastic state handed
// from one generation to the next, and the timeline. What differs between
// devices is a DeviceEngine (worker/engine/device_engine.h); what differs
// between modes is a GradientExchange (worker/exchange/gradient_exchange.h).
//
// training_loop.cc holds the epochs and steps, training_state.cc the
// checkpoints, resume and elastic agreement, training_control.cc the
// evaluations and what they decide (early stopping, the best checkpoint).
//
// Ownership: owns the data sets, the engine and the exchange; borrows what
// TrainOptions borrows. Thread safety: Run() from one thread, once.
#ifndef COHORT_WORKER_TRAINING_LOOP_H_
#define COHORT_WORKER_TRAINING_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/checkpoint.h"
#include "common/safetensors.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/early_stopping.h"
#include "worker/engine/device_engine.h"
#include "worker/exchange/gradient_exchange.h"
#include "worker/loop/training_log.h"
#include "worker/objective.h"
#include "worker/progress.h"
#include "worker/trainer.h"

namespace cohort {

// Makes the engine of a run once its data is loaded.
using EngineFactory =
    std::function<absl::StatusOr<std::unique_ptr<DeviceEngine>>(
        const JobSpec& spec, const TrainOptions& options,
        const DataSplits& data)>;

class TrainingLoop : public Trainer {
 public:
  TrainingLoop(const JobSpec& spec, const TrainOptions& options)
      : spec_(spec), options_(options), dist_(options.distributed) {}

  // Loads the data, builds the engine and its exchange, and restores the
  // newest state (checkpoint or elastic snapshot). Everything that can
  // fail because of the user's input fails here.
  absl::Status Setup(const EngineFactory& make_engine);
  absl::StatusOr<TrainResult> Run() override;

 private:
  class LoaderSource;
  class ChunkSource;

  // --- training_loop.cc: epochs and steps ---
  absl::StatusOr<TrainResult> RunEpochs();
  absl::Status ReadLimits();
  absl::Status OpenLoaders(int64_t epoch, LoaderSource* source);
  StepPlan PlanStep(int64_t clock, int active, bool more) const;
  ReadOptions TrainReads(uint64_t seed, int64_t epoch) const;
  absl::StatusOr<EpochResult> TrainEpoch(int64_t epoch, Progress& progress);
  absl::StatusOr<EpochResult> TrainSharedEpoch(int64_t epoch,
                                               Progress& progress);
  // One step of `plan.active` replicas; returns its mean loss.
  absl::StatusOr<double> Step(const StepPlan& plan, const ExchangeStep& ex,
                              BatchSource& source, int64_t epoch,
                              EpochResult& er, Progress& progress);
  absl::Status FinishExchange();
  // Adds what the exchange moved since the last call to the totals (and,
  // when `in_window`, to the bus-bandwidth window).
  void TakeExchangeStats(bool in_window);
  absl::Status Update(const StepPlan& plan);
  absl::Status Pull(int64_t clock);
  void SlowDown(double compute_s);
  double AccountStep(int64_t epoch, absl::Span<const ReplicaResult> results,
                     EpochResult& er, Progress& progress);
  // At most every 100 ms unless `now`.
  absl::Status ReportStep(int64_t epoch, double loss, bool now = false);
  absl::Status MaybeEvaluate(EpochResult& er, bool epoch_complete);

  // --- training_control.cc: evaluations and what they decide ---
  // Whether the job evaluates at all (eval not disabled, a test split).
  bool Evaluates() const {
    return !spec_.eval().disable() && data_.test->size() > 0;
  }
  // Whether an evaluation is due after step_ (every eval.every_steps, at
  // an epoch's end, at the last step) and has not run at step_ yet.
  bool EvaluationDue(bool epoch_done) const;
  // After each step of a synchronous epoch: the evaluation if due (then
  // early stopping and the best checkpoint), before the step's checkpoint
  // so that the checkpoint holds what it decided.
  absl::Status EvaluateIfDue(bool epoch_done, Progress& progress);
  // A resumed state whose step's evaluation did not run (the run died in
  // it) runs it now, so that control sees the evaluations an undisturbed
  // run sees.
  absl::Status CatchUpEvaluation(Progress& progress);
  // Evaluates on the test split into last_metrics_ and the result, then
  // lets control observe the metric. `epoch_done`: step_ ends an epoch.
  absl::Status Evaluate(bool epoch_done);
  absl::Status Control(bool epoch_done);
  // The best checkpoint (checkpoint.keep_best) in checkpoint_dir_/best,
  // with best.json beside it.
  absl::Status WriteBest(bool epoch_done);
  // The control state into a checkpoint's metadata, and back.
  void CaptureControl(Checkpoint& c) const;
  absl::Status RestoreControl(const Checkpoint& c);
  void FillControlResult();
  bool StoppedEarly() const { return control_ && control_->ShouldStop(); }
  void StartEpochTotals(int64_t epoch);
  void Trace(absl::string_view name, int lane, absl::Time start,
             absl::Time end = absl::Now(), absl::string_view args = "");

  // --- training_state.cc: checkpoints, resume, elastic agreement ---
  // Checkpoints (common/checkpoint.h): rank 0 of an all-reduce job, or a
  // single process, writes them; PS jobs' state lives on the shards.
  bool Checkpoints() const {
    return !checkpoint_dir_.empty() && !PsMode() &&
           (dist_ == nullptr || dist_->rank == 0);
  }
  absl::StatusOr<Checkpoint> Capture(int64_t epoch, int64_t position,
                                     int64_t epoch_steps);
  // `c`'s tensors laid out by the engine's StateLayout, back to back;
  // DATA_LOSS naming the tensor when one is missing or has another size.
  absl::Status FlattenState(const Checkpoint& c, std::vector<float>* out) const;
  absl::Status Restore(const Checkpoint& c);
  // The newest state this worker can start from: the checkpoint directory's
  // newest valid checkpoint or the elastic snapshot, whichever is newer.
  absl::StatusOr<std::optional<Checkpoint>> ResumeCandidate();
  // Single process: restores the candidate. All-reduce workers: every rank
  // tells its candidate's step, and the rank with the newest one gives its
  // state to all (AgreeOnState).
  absl::Status Resume();
  absl::Status ResumeTrainingState();
  // Samples of one optimizer step over the job (batch x accumulation x
  // replicas), recorded in checkpoints; NoteGlobalBatch says so when a
  // resumed state was trained with another.
  int64_t GlobalBatch() const;
  void NoteGlobalBatch(int64_t written);
  // Starting weights: --init-from, the spec's init_from, or the
  // initializers of its model.onnx (training_state.cc).
  bool HasStartingWeights() const;
  absl::StatusOr<SafetensorsFile> StartingWeights(std::string* path) const;
  absl::Status InitWeights();
  // The chief's logs (log.dir), continued after the step training starts
  // from; nothing elsewhere.
  absl::Status OpenLog();
  absl::Status AgreeOnState(const std::optional<Checkpoint>& mine);
  absl::Status FinalCheckpoint();
  absl::Status MaybeCheckpoint(int64_t epoch, int64_t steps_in_epoch,
                               int64_t batches);
  // After a stop signal: a final checkpoint of the last completed step (by
  // whoever writes checkpoints), then CANCELLED naming the step.
  absl::Status StopWithFinalCheckpoint();
  // An elastic worker whose generation ended: keeps the state after the
  // last completed step, and what this generation trained, for the next.
  void SaveForNextGeneration();
  // The exchange's own state (compression's error feedback) is each rank's:
  // every rank saves it beside the checkpoints at the steps rank 0 writes
  // one by step count and at the end, and takes it back when it resumes at
  // such a step (training_exchange_state.cc).
  absl::Status SaveExchangeState(bool final_step);
  void LoadExchangeState();
  std::string ExchangeStatePath(int64_t step) const;
  // Adds what earlier generations trained to this one's result.
  void AddCarried();

  bool PsMode() const { return dist_ != nullptr && dist_->ps_mode; }
  // SSP and ASYNC: workers claim each epoch's chunks as they go (see
  // DistributedContext::claim_chunks) instead of taking a fixed share.
  bool SharedData() const {
    return PsMode() && spec_.ps().consistency() != SYNC;
  }
  // Whether evaluation combines results over workers. Not with SSP or
  // ASYNC shards: a fast worker may be whole epochs ahead of a straggler,
  // and a collective would make it wait (and time out) for it. Each worker
  // then evaluates the whole test set with its own parameters.
  bool EvaluateAcrossWorkers() const {
    return dist_ != nullptr && dist_->world_size > 1 && !SharedData();
  }
  bool StopSignalled() const {
    return options_.stop_signal != nullptr && options_.stop_signal->load();
  }
  int TotalReplicas() const {
    return dist_ != nullptr ? dist_->total_replicas : engine_->replicas();
  }
  int GlobalReplica(int r) const {
    return (dist_ != nullptr ? dist_->replica_offset : 0) + r;
  }
  int64_t TotalSteps() const;
  // Optimizer steps that `batches` batches per replica make.
  int64_t StepsOf(int64_t batches) const;
  // Whether training is over: max_steps reached (by this worker's steps,
  // or with shared data by rounds claimed), or early stopping decided.
  bool StepLimitReached() const {
    return StoppedEarly() ||
           (max_steps_ >= 0 &&
            (SharedData() ? next_round_ >= max_steps_ : step_ >= max_steps_));
  }

  const JobSpec spec_;
  const TrainOptions options_;
  const DistributedContext* const dist_;  // null for a single process
  DataSplits data_;
  std::optional<Objective> objective_;  // after Setup
  // Best evaluation and early stopping; set when the job evaluates.
  std::optional<EarlyStopping> control_;
  Metrics last_metrics_;  // of the newest evaluation
  std::unique_ptr<DeviceEngine> engine_;
  std::unique_ptr<GradientExchange> exchange_;
  std::vector<int64_t>
      exchange_state_steps_;  // saved by this run, oldest first
  TrainResult result_;
  int64_t step_ = 0;  // this worker's steps
  int64_t steps_per_epoch_ = 1;
  int64_t accumulation_ = 1;  // batches per replica per optimizer step
  int64_t epochs_ = 0;
  int64_t max_steps_ = -1;  // -1: no limit; 0: no step at all
  // Checkpointing and where a resumed run starts.
  std::string checkpoint_dir_;
  absl::Time last_checkpoint_;
  int64_t last_checkpoint_step_ = -1;  // the step the newest one saved
  int64_t start_epoch_ = 0;
  int64_t start_position_ = 0;     // samples of start_epoch_'s order done
  int64_t start_epoch_steps_ = 0;  // and its steps done
  int64_t restored_step_ = 0;      // the step the state was restored from
  bool restored_ = false;          // a checkpoint or peer's state, not fresh
  int64_t steps_this_run_ = 0;
  // Where training stands after the last completed step: epoch, sampler
  // position and steps of the epoch; and the position the current epoch's
  // loaders started from.
  int64_t cur_epoch_ = 0;
  int64_t cur_position_ = 0;
  int64_t cur_epoch_steps_ = 0;
  int64_t segment_start_ = 0;
  bool epoch_complete_ = false;  // the last TrainEpoch ran out of data
  // Shared data: the round after the newest chunk claimed.
  int64_t next_round_ = 0;
  // The current epoch's totals, kept by AccountStep (over
  // epoch_loss_steps_ steps: a resumed epoch's first steps may have run
  // elsewhere), and when its training began.
  int64_t epoch_loss_steps_ = 0;
  absl::Time epoch_start_ = absl::InfinitePast();
  double epoch_loss_sum_ = 0;
  int64_t epoch_correct_ = 0;
  int64_t epoch_seen_ = 0;
  std::vector<double> recent_losses_;
  // Where replica 0's step time goes, since the last report.
  StepTimes times_;
  int64_t window_steps_ = 0;
  int64_t window_samples_ = 0;
  absl::Time window_start_;
  int64_t bytes_reduced_ = 0;
  // The last step's gradient norm before clipping (-1: not known).
  double grad_norm_ = -1;
  // The chief's training logs (null elsewhere, or without log.dir), and
  // what the newest step tells them, gathered as the step goes.
  std::unique_ptr<TrainingLog> log_;
  StepScalars logged_;
  absl::Time last_report_ = absl::InfinitePast();
  int64_t window_bytes_ = 0;  // all-reduced in the window, and the time
  double window_comm_s_ = 0;  // the collectives took
};

}  // namespace cohort

#endif  // COHORT_WORKER_TRAINING_LOOP_H_
