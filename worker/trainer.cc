#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/checkpoint.h"
#include "common/logging.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "proto/coordinator.pb.h"
#include "worker/comm/communicator.h"
#include "worker/compute_threads.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/data/sampler.h"
#include "worker/gpu/gpu_plugin.h"
#include "worker/gradient_sync.h"
#include "worker/loss.h"
#include "worker/optim/lr_schedule.h"
#include "worker/optim/optimizer.h"
#include "worker/progress.h"
#include "worker/replica_pool.h"
#include "worker/timeline.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// What one replica owns for the whole run.
struct Replica {
  std::unique_ptr<Model<float>> model;
  std::unique_ptr<Loader> loader;
  Batch batch;
  Tensor grad_out;             // dLoss/dOutput
  Tensor target;               // one-hot targets for MSE
  std::vector<float> scratch;  // ChunkStep's decoding buffer
  double loss = 0;             // this step
  int64_t correct = 0;
  int64_t seen = 0;
  bool done = false;  // loader exhausted this epoch
};

// The part of the flat parameter buffer one thread reduces and steps.
struct Slice {
  int64_t begin = 0;
  int64_t end = 0;
  std::unique_ptr<Optimizer<float>> optimizer;
};

double Seconds(absl::Time since) {
  return absl::ToDoubleSeconds(absl::Now() - since);
}

// Checks that the data fits the model: same per-sample shape and enough
// outputs for the classes.
absl::Status CheckModelFitsData(const JobSpec& spec, const Model<float>& model,
                                const Dataset& data) {
  const Shape& out = model.output_shape();
  if (spec.loss() == CROSS_ENTROPY &&
      (out.size() != 1 || out[0] < data.num_classes())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model's output per sample is ", ShapeString(out),
                     " but cross-entropy over a data set of ",
                     data.num_classes(), " classes needs [", data.num_classes(),
                     "] (add a final linear layer)"));
  }
  return absl::OkStatus();
}

class LocalTrainer : public Trainer {
 public:
  LocalTrainer(const JobSpec& spec, const TrainOptions& options)
      : spec_(spec),
        options_(options),
        dist_(options.distributed),
        pool_(options.replicas) {}

  absl::Status Setup();
  absl::StatusOr<TrainResult> Run() override;

 private:
  absl::StatusOr<TrainResult> RunEpochs();
  bool StopSignalled() const {
    return options_.stop_signal != nullptr && options_.stop_signal->load();
  }
  // The codes a collective fails with when a peer goes away.
  static bool FailedInCollective(const absl::Status& s) {
    return s.code() == absl::StatusCode::kUnavailable ||
           s.code() == absl::StatusCode::kAborted ||
           s.code() == absl::StatusCode::kDeadlineExceeded ||
           s.code() == absl::StatusCode::kInternal;
  }
  // After a stop signal: a final checkpoint of the last completed step (by
  // whoever writes checkpoints), then CANCELLED naming the step.
  absl::Status StopWithFinalCheckpoint();
  // Adds an event to the --timeline, if any.
  void Trace(absl::string_view name, int lane, absl::Time start,
             absl::Time end = absl::Now(), absl::string_view args = "") {
    if (options_.timeline != nullptr) {
      options_.timeline->Add(name, lane, start, end, args);
    }
  }
  absl::Status BuildModels();
  void BuildSlices();
  absl::StatusOr<EpochResult> TrainEpoch(int64_t epoch, Progress& progress);
  absl::StatusOr<EpochResult> TrainSharedEpoch(int64_t epoch,
                                               Progress& progress);
  absl::Status StartEpoch(int64_t epoch);
  absl::Status StartSharedEpoch(int64_t epoch);
  void ReplicaStep(int r);
  void ChunkStep(int r, int64_t chunk);
  void ForwardBackward(int r, absl::Time start, absl::Time data_ready);
  void ReduceLocal(int r);
  // Replica r's slice: the local mean (when `reduce_local`), and whether
  // the slice's gradient is finite (into slice_finite_[r]).
  void ReduceAndCheck(int r, bool reduce_local);
  void OptimizerStep(int r, double lr);
  // The optimizer step over all slices, unless the gradient holds a NaN or
  // an infinity (then the job's nonfinite_gradients policy decides).
  absl::Status ReduceAndStep(double lr, bool reduce_local);
  void SlowDown();
  absl::Status SynchronizeGradients();
  bool PsMode() const { return dist_ != nullptr && dist_->ps_mode; }
  // Whether evaluation combines results over workers. Not with SSP or
  // ASYNC shards: a fast worker may be whole epochs ahead of a straggler,
  // and a collective would make it wait (and time out) for it. Each worker
  // then evaluates the whole test set with its own parameters.
  bool EvaluateAcrossWorkers() const {
    return dist_ != nullptr && dist_->world_size > 1 &&
           !(PsMode() && spec_.ps().consistency() != SYNC);
  }
  // SSP and ASYNC: workers claim each epoch's chunks as they go (see
  // DistributedContext::claim_chunks) instead of taking a fixed share.
  bool SharedData() const {
    return PsMode() && spec_.ps().consistency() != SYNC;
  }
  absl::Status PsSetup();
  // A push overlapping backward: begin before it, PsReady from its
  // callbacks (replica r is final from `offset` on), finish after it.
  void PsBeginPush(int64_t clock, double lr, int weight, int64_t first_chunk);
  void PsReady(int r, int64_t offset);
  absl::Status PsFinishPush();
  absl::Status PsPull(int64_t clock);
  // Adds the step of replicas 0..count-1 to the epoch's and the run's
  // totals and the progress display; returns its mean loss.
  double AccountStep(int64_t epoch, int count, EpochResult& er,
                     Progress& progress);
  absl::Status ReportStep(int64_t epoch, double loss);
  // Checkpoints (common/checkpoint.h): rank 0 of an all-reduce job, or a
  // single process, writes them; PS jobs' state lives on the shards.
  bool Checkpoints() const {
    return !checkpoint_dir_.empty() && !PsMode() &&
           (dist_ == nullptr || dist_->rank == 0);
  }
  // The newest state this worker can start from: the checkpoint directory's
  // newest valid checkpoint or the elastic snapshot, whichever is newer.
  absl::StatusOr<std::optional<Checkpoint>> ResumeCandidate();
  // Single process: restores the candidate. All-reduce workers: every rank
  // tells its candidate's step, and the rank with the newest one gives its
  // state to all (AgreeOnState).
  absl::Status Resume();
  absl::Status AgreeOnState(const std::optional<Checkpoint>& mine);
  absl::Status MaybeCheckpoint(int64_t epoch, int64_t steps_in_epoch,
                               int64_t batches);
  Checkpoint Capture(int64_t epoch, int64_t position, int64_t epoch_steps);
  // The state's tensors, in order: name and element count for this model.
  std::vector<std::pair<std::string, int64_t>> StateLayout() const;
  // `c`'s tensors laid out by StateLayout, back to back; DATA_LOSS naming
  // the tensor when one is missing or has another size.
  absl::Status FlattenState(const Checkpoint& c, std::vector<float>* out) const;
  absl::Status Restore(const Checkpoint& c);
  // An elastic worker whose generation ended: keeps the state after the
  // last completed step, and what this generation trained, for the next.
  void SaveForNextGeneration();
  // Adds what earlier generations trained to this one's result.
  void AddCarried();
  // Dropout draws from a generator seeded by (seed, replica, step), so a
  // resumed run draws what an uninterrupted one would.
  void SeedStep();
  absl::Status Evaluate(EpochResult* result);
  absl::Status AverageBuffersAcrossWorkers();
  int TotalReplicas() const {
    return dist_ != nullptr ? dist_->total_replicas : options_.replicas;
  }
  int GlobalReplica(int r) const {
    return (dist_ != nullptr ? dist_->replica_offset : 0) + r;
  }
  int64_t ComputeStepsPerEpoch() const;
  int64_t StepsPerEpoch() const { return steps_per_epoch_; }
  int64_t TotalSteps() const;
  // Whether max_steps is reached: by this worker's steps, or with shared
  // data by rounds claimed.
  bool StepLimitReached() const {
    return max_steps_ > 0 &&
           (SharedData() ? next_round_ >= max_steps_ : step_ >= max_steps_);
  }

  const JobSpec spec_;
  const TrainOptions options_;
  const DistributedContext* const dist_;  // null for a single process
  ReplicaPool pool_;
  std::unique_ptr<GradientSync> sync_;  // multi-worker all-reduce only
  // PS mode: how far each local replica's backward has come in this step,
  // the replicas taking part (`weight`), and from where replica 0's buffer
  // holds their mean (and is final, handed to ps_push_ready).
  absl::Mutex ps_mu_;
  std::vector<int64_t> ps_ready_ ABSL_GUARDED_BY(ps_mu_);
  int ps_active_ ABSL_GUARDED_BY(ps_mu_) = 0;
  int64_t ps_final_from_ ABSL_GUARDED_BY(ps_mu_) = 0;
  DataSplits data_;
  std::vector<Replica> replicas_;
  std::vector<Slice> slices_;
  std::vector<char> slice_finite_;  // per slice, this step
  TrainResult result_;
  int64_t step_ = 0;  // this worker's steps
  // Checkpointing and where a resumed run starts.
  std::string checkpoint_dir_;
  absl::Time last_checkpoint_;
  int64_t start_epoch_ = 0;
  int64_t start_position_ = 0;     // samples of start_epoch_'s order done
  int64_t start_epoch_steps_ = 0;  // and its steps done
  int64_t restored_step_ = 0;      // the step the state was restored from
  int64_t steps_this_run_ = 0;
  // Where training stands after the last completed step: epoch, sampler
  // position and steps of the epoch; and the position the current epoch's
  // loaders started from.
  int64_t cur_epoch_ = 0;
  int64_t cur_position_ = 0;
  int64_t cur_epoch_steps_ = 0;
  int64_t segment_start_ = 0;
  bool epoch_complete_ = false;  // the last TrainEpoch ran out of data
  // Shared data: every global replica's samples of the current epoch, and
  // the round after the newest chunk claimed.
  std::vector<std::vector<int64_t>> epoch_indices_;
  int64_t next_round_ = 0;
  // The current epoch's totals, kept by AccountStep.
  double epoch_loss_sum_ = 0;
  int64_t epoch_correct_ = 0;
  int64_t epoch_seen_ = 0;
  int64_t steps_per_epoch_ = 1;
  int64_t epochs_ = 0;
  int64_t max_steps_ = 0;
  std::vector<double> recent_losses_;
  // Where replica 0's step time goes, since the last ReportStep.
  StepTimes times_;
  int64_t window_steps_ = 0;
  int64_t window_samples_ = 0;
  absl::Time window_start_;
  int64_t bytes_reduced_ = 0;
  absl::Time last_report_ = absl::InfinitePast();
  int64_t window_bytes_ = 0;   // all-reduced in the window, and the time
  double window_comm_s_ = 0;   // the collectives took
  double step_compute_s_ = 0;  // replica 0's forward and backward, this step
};

absl::Status LocalTrainer::BuildModels() {
  const int R = options_.replicas;
  const Shape input = data_.train->sample_shape();
  if (!spec_.model().zoo().empty()) {
    ASSIGN_OR_RETURN(Shape want, ZooInputShape(spec_.model().zoo()));
    if (want != input) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo model ", spec_.model().zoo(), " takes samples of shape ",
          ShapeString(want), " but the data set gives ", ShapeString(input)));
    }
  }
  replicas_.resize(R);
  ASSIGN_OR_RETURN(replicas_[0].model,
                   BuildModel<float>(spec_.model(), input, spec_.seed()));
  RETURN_IF_ERROR(CheckModelFitsData(spec_, *replicas_[0].model, *data_.train));
  for (int r = 1; r < R; ++r) {
    ASSIGN_OR_RETURN(replicas_[r].model,
                     BuildReplica<float>(spec_.model(), *replicas_[0].model));
  }
  for (int r = 0; r < R; ++r) {
    replicas_[r].model->SeedRandom(spec_.seed() + GlobalReplica(r));
  }
  if (dist_ != nullptr && !dist_->ps_mode) {
    std::vector<float*> grads;
    for (Replica& rep : replicas_) grads.push_back(rep.model->grads().data());
    std::vector<int64_t> offsets;
    for (const auto& e : replicas_[0].model->param_store().entries()) {
      offsets.push_back(e.offset);
    }
    sync_ = std::make_unique<GradientSync>(
        std::move(grads), replicas_[0].model->grads().size(),
        dist_->total_replicas, dist_->comm, dist_->bucket_bytes,
        std::move(offsets));
    if (options_.timeline != nullptr) {
      Timeline* timeline = options_.timeline;
      sync_->set_observer([timeline](int bucket, int lane, int64_t bytes,
                                     absl::Time start, absl::Time end) {
        timeline->Add(
            "allreduce", Timeline::kBucketLane + lane, start, end,
            absl::StrCat("\"bucket\": ", bucket, ", \"bytes\": ", bytes));
      });
    }
  }
  return absl::OkStatus();
}

void LocalTrainer::BuildSlices() {
  const int R = options_.replicas;
  const int64_t n = replicas_[0].model->params().size();
  slices_.resize(R);
  for (int r = 0; r < R; ++r) {
    // 16-element boundaries keep every slice's vector loads aligned.
    slices_[r].begin = std::min(n, (n * r / R) / 16 * 16);
    slices_[r].end = r + 1 == R ? n : std::min(n, (n * (r + 1) / R) / 16 * 16);
    // In PS mode the shards own the optimizer and its state.
    if (!PsMode()) {
      slices_[r].optimizer = MakeOptimizer<float>(
          spec_.optimizer(), slices_[r].end - slices_[r].begin);
    }
  }
}

absl::Status LocalTrainer::Setup() {
  const absl::Time start = absl::Now();
  SetComputeThreads(std::max(1, options_.threads / options_.replicas));
  ASSIGN_OR_RETURN(data_,
                   LoadDataset(spec_.data(), options_.data_dir, spec_.seed()));
  RETURN_IF_ERROR(BuildModels());
  BuildSlices();
  steps_per_epoch_ = ComputeStepsPerEpoch();
  epochs_ = options_.epochs >= 0 ? options_.epochs : spec_.epochs();
  max_steps_ = options_.max_steps >= 0 ? options_.max_steps : spec_.max_steps();
  if (epochs_ <= 0 && max_steps_ <= 0) {
    return absl::InvalidArgumentError(
        "nothing to train: epochs and max_steps are both 0");
  }
  if (epochs_ <= 0) {
    epochs_ = (max_steps_ + StepsPerEpoch() - 1) / StepsPerEpoch();
  }
  checkpoint_dir_ = !options_.checkpoint_dir.empty() ? options_.checkpoint_dir
                                                     : spec_.checkpoint().dir();
  if (!checkpoint_dir_.empty() && spec_.checkpoint().every_steps() <= 0 &&
      spec_.checkpoint().every_seconds() <= 0) {
    return absl::InvalidArgumentError(
        "checkpoints to " + checkpoint_dir_ +
        " need checkpoint.every_steps or checkpoint.every_seconds in the spec");
  }
  RETURN_IF_ERROR(Resume());
  cur_epoch_ = start_epoch_;
  cur_position_ = start_position_;
  cur_epoch_steps_ = start_epoch_steps_;
  last_checkpoint_ = absl::Now();
  result_.job_name = spec_.name();
  result_.model = spec_.model().zoo().empty() ? "custom" : spec_.model().zoo();
  result_.parameters = replicas_[0].model->num_parameters();
  result_.replicas = options_.replicas;
  result_.threads = options_.threads;
  result_.setup_seconds = Seconds(start);
  window_start_ = absl::Now();
  return absl::OkStatus();
}

int64_t LocalTrainer::ComputeStepsPerEpoch() const {
  DistributedSampler sampler(data_.train->size(), TotalReplicas(), 0,
                             spec_.seed(), true, spec_.drop_last());
  const int64_t n = sampler.num_samples();
  const int64_t b = spec_.batch_size();
  return std::max<int64_t>(1, spec_.drop_last() ? n / b : (n + b - 1) / b);
}

int64_t LocalTrainer::TotalSteps() const {
  const int64_t by_epochs = epochs_ * StepsPerEpoch();
  return max_steps_ > 0 ? std::min(max_steps_, by_epochs) : by_epochs;
}

void LocalTrainer::ReplicaStep(int r) {
  Replica& rep = replicas_[r];
  const absl::Time t0 = absl::Now();
  if (!rep.loader->Next(&rep.batch)) {
    rep.done = true;
    return;
  }
  ForwardBackward(r, t0, absl::Now());
}

// Shared data: replica r computes chunk `chunk` of the epoch, decoding it
// here (a claim is known only just before its step, so nothing prefetches;
// decoding a batch takes a few percent of its step).
void LocalTrainer::ChunkStep(int r, int64_t chunk) {
  const absl::Time t0 = absl::Now();
  const int64_t step = chunk / TotalReplicas();
  const std::vector<int64_t>& indices = epoch_indices_[chunk % TotalReplicas()];
  const int64_t b = spec_.batch_size();
  const int64_t first = std::min<int64_t>(step * b, indices.size());
  const int64_t end = std::min<int64_t>(first + b, indices.size());
  Replica& rep = replicas_[r];
  FillBatch(*data_.train,
            absl::MakeConstSpan(indices.data() + first, end - first),
            BatchLayout::kBatchInner, &rep.batch, &rep.scratch);
  rep.batch.step_in_epoch = step;
  ForwardBackward(r, t0, absl::Now());
}

void LocalTrainer::ForwardBackward(int r, absl::Time t0, absl::Time t1) {
  Replica& rep = replicas_[r];
  Trace("data", r, t0, t1);
  const Tensor& out = rep.model->Forward(rep.batch.features, Mode::kTrain);
  const int64_t n = static_cast<int64_t>(rep.batch.labels.size());
  rep.correct = 0;
  if (spec_.loss() == CROSS_ENTROPY) {
    rep.loss = SoftmaxCrossEntropy<float>(out, rep.batch.labels, &rep.grad_out,
                                          &rep.correct);
  } else {
    // MSE against one-hot targets of the classes.
    rep.target.Resize(out.shape());
    rep.target.SetZero();
    const int64_t k = out.size() / n;
    for (int64_t i = 0; i < n; ++i) {
      if (rep.batch.labels[i] < k) rep.target[i * k + rep.batch.labels[i]] = 1;
    }
    rep.loss = MeanSquaredError<float>(out, rep.target, &rep.grad_out);
  }
  rep.seen = n;
  const absl::Time backward_start = absl::Now();
  Trace("forward", r, t1, backward_start);
  if (sync_ != nullptr) {
    rep.model->Backward(rep.grad_out,
                        [this, r](int64_t offset) { sync_->Ready(r, offset); });
  } else if (PsMode()) {
    rep.model->Backward(rep.grad_out,
                        [this, r](int64_t offset) { PsReady(r, offset); });
  } else {
    rep.model->Backward(rep.grad_out);
  }
  Trace("backward", r, backward_start);
  if (r == 0) {
    step_compute_s_ = Seconds(t1);
    times_.set_data_s(times_.data_s() + absl::ToDoubleSeconds(t1 - t0));
    times_.set_compute_s(times_.compute_s() + step_compute_s_);
  }
}

// Stretches this step's forward and backward to max(their time,
// min_step_seconds) times slowdown by sleeping, counted as compute: the
// worker behaves as slower hardware of its own would.
void LocalTrainer::SlowDown() {
  const double base = std::max(step_compute_s_, options_.min_step_seconds);
  const double extra = base * options_.slowdown - step_compute_s_;
  if (extra <= 0) return;
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Seconds(extra));
  Trace("slowdown sleep", Timeline::kStepLane, start);
  times_.set_compute_s(times_.compute_s() + extra);
}

// Replica 0's slice of the gradient becomes the mean over local replicas.
void LocalTrainer::ReduceLocal(int r) {
  const Slice& s = slices_[r];
  const int64_t len = s.end - s.begin;
  const int R = options_.replicas;
  if (len == 0 || R == 1) return;
  float* g0 = replicas_[0].model->grads().data() + s.begin;
  const float scale = 1.0f / R;
  for (int q = 1; q < R; ++q) {
    const float* gq = replicas_[q].model->grads().data() + s.begin;
    for (int64_t i = 0; i < len; ++i) g0[i] += gq[i];
  }
  for (int64_t i = 0; i < len; ++i) g0[i] *= scale;
}

void LocalTrainer::ReduceAndCheck(int r, bool reduce_local) {
  const Slice& s = slices_[r];
  if (reduce_local) ReduceLocal(r);
  const float* g = replicas_[0].model->grads().data();
  // x * 0 is 0 for finite x and NaN otherwise. Eight independent sums let
  // the compiler use vector adds without reassociating floats (6.5x faster
  // than one running sum on 11M floats: 2.2 ms against 14.5).
  float acc[8] = {};
  int64_t i = s.begin;
  for (; i + 8 <= s.end; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += g[i + k] * 0.0f;
  }
  for (; i < s.end; ++i) acc[0] += g[i] * 0.0f;
  float probe = 0;
  for (float a : acc) probe += a;
  slice_finite_[r] = probe == 0;
}

void LocalTrainer::OptimizerStep(int r, double lr) {
  const Slice& s = slices_[r];
  const int64_t len = s.end - s.begin;
  if (len == 0) return;
  float* g0 = replicas_[0].model->grads().data() + s.begin;
  float* p = replicas_[0].model->params().data() + s.begin;
  s.optimizer->Step(absl::MakeSpan(p, len), absl::MakeConstSpan(g0, len), lr);
}

absl::Status LocalTrainer::ReduceAndStep(double lr, bool reduce_local) {
  slice_finite_.assign(options_.replicas, 1);
  pool_.Run([&](int r) { ReduceAndCheck(r, reduce_local); });
  const bool finite = std::all_of(slice_finite_.begin(), slice_finite_.end(),
                                  [](char f) { return f != 0; });
  if (finite) {
    pool_.Run([&](int r) { OptimizerStep(r, lr); });
    return absl::OkStatus();
  }
  if (spec_.nonfinite_gradients() == NONFINITE_SKIP) {
    ++result_.skipped_steps;
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "step ", step_ + 1,
      ": the gradient holds NaN or infinite values (has training diverged? "
      "a lower learning rate may help); nonfinite_gradients: NONFINITE_SKIP "
      "skips such steps instead"));
}

// Hands the initial parameters to the worker process, which takes the
// shards' in exchange. Sizes include each tensor's alignment padding, so
// the partitions tile the flat buffer exactly (padding stays zero: its
// gradient is always zero).
absl::Status LocalTrainer::PsSetup() {
  Tensor& params = replicas_[0].model->params();
  const auto& entries = replicas_[0].model->param_store().entries();
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t end =
        i + 1 < entries.size() ? entries[i + 1].offset : params.size();
    sizes.push_back(end - entries[i].offset);
  }
  return dist_->ps_setup(params.data(), sizes);
}

void LocalTrainer::PsBeginPush(int64_t clock, double lr, int weight,
                               int64_t first_chunk) {
  const int64_t n = replicas_[0].model->grads().size();
  {
    absl::MutexLock lock(&ps_mu_);
    ps_ready_.assign(options_.replicas, n);
    ps_active_ = weight;
    ps_final_from_ = n;
  }
  dist_->ps_push_begin(replicas_[0].model->grads().data(), clock, lr, weight,
                       first_chunk);
}

// Once every taking part has passed a point, the range behind it becomes
// their mean in replica 0's buffer and goes out while backward goes on.
void LocalTrainer::PsReady(int r, int64_t offset) {
  absl::MutexLock lock(&ps_mu_);
  ps_ready_[r] = std::min(ps_ready_[r], offset);
  const int64_t from =
      *std::max_element(ps_ready_.begin(), ps_ready_.begin() + ps_active_);
  if (from >= ps_final_from_) return;
  const int count = ps_active_;
  if (count > 1) {
    float* g0 = replicas_[0].model->grads().data();
    const float scale = 1.0f / count;
    for (int q = 1; q < count; ++q) {
      const float* gq = replicas_[q].model->grads().data();
      for (int64_t i = from; i < ps_final_from_; ++i) g0[i] += gq[i];
    }
    for (int64_t i = from; i < ps_final_from_; ++i) g0[i] *= scale;
  }
  ps_final_from_ = from;
  dist_->ps_push_ready(from);
}

absl::Status LocalTrainer::PsFinishPush() {
  for (int r = 0; r < options_.replicas; ++r) PsReady(r, 0);
  const absl::Time t = absl::Now();
  absl::StatusOr<int64_t> bytes = dist_->ps_push_finish();
  Trace("push", Timeline::kBucketLane, t);
  times_.set_comm_wait_s(times_.comm_wait_s() + Seconds(t));
  if (!bytes.ok()) return bytes.status();
  bytes_reduced_ += *bytes;
  return absl::OkStatus();
}

// The parameters for `clock` into the buffer every local replica shares.
absl::Status LocalTrainer::PsPull(int64_t clock) {
  const absl::Time t = absl::Now();
  absl::StatusOr<int64_t> bytes =
      dist_->ps_pull(clock, replicas_[0].model->params().data());
  Trace("pull", Timeline::kBucketLane, t, absl::Now(),
        absl::StrCat("\"clock\": ", clock));
  times_.set_comm_wait_s(times_.comm_wait_s() + Seconds(t));
  if (!bytes.ok()) return bytes.status();
  bytes_reduced_ += *bytes;
  return absl::OkStatus();
}

absl::Status LocalTrainer::StartEpoch(int64_t epoch) {
  uint64_t seed = spec_.seed();
  if (dist_ != nullptr) {
    ASSIGN_OR_RETURN(seed, dist_->epoch_seed(epoch));
  }
  const int threads = std::max(1, spec_.data().loader_threads());
  const int prefetch = std::max(1, spec_.data().prefetch());
  // A resumed epoch deals out the rest of its order over this world.
  segment_start_ = epoch == start_epoch_ ? start_position_ : 0;
  for (int r = 0; r < options_.replicas; ++r) {
    DistributedSampler sampler(data_.train->size(), TotalReplicas(),
                               GlobalReplica(r), seed, true, spec_.drop_last());
    std::vector<int64_t> indices = sampler.IndicesFrom(epoch, segment_start_);
    replicas_[r].loader = std::make_unique<Loader>(
        data_.train.get(), std::move(indices), spec_.batch_size(),
        spec_.drop_last(), BatchLayout::kBatchInner, threads, prefetch);
    replicas_[r].done = false;
  }
  return absl::OkStatus();
}

absl::Status LocalTrainer::StartSharedEpoch(int64_t epoch) {
  ASSIGN_OR_RETURN(const uint64_t seed, dist_->epoch_seed(epoch));
  epoch_indices_.resize(TotalReplicas());
  for (int g = 0; g < TotalReplicas(); ++g) {
    DistributedSampler sampler(data_.train->size(), TotalReplicas(), g, seed,
                               true, spec_.drop_last());
    epoch_indices_[g] = sampler.Indices(epoch);
  }
  return absl::OkStatus();
}

absl::Status LocalTrainer::SynchronizeGradients() {
  const absl::Time t = absl::Now();
  absl::Status s = sync_->Finish();
  Trace("allreduce wait", Timeline::kStepLane, t);
  times_.set_comm_wait_s(times_.comm_wait_s() + Seconds(t));
  const BucketReducer::Stats stats = sync_->TakeStats();
  bytes_reduced_ += stats.bytes;
  window_bytes_ += stats.bytes;
  window_comm_s_ += stats.comm_seconds;
  return s;
}

// Tells the worker process (and through it the coordinator) how training
// goes; its answer may stop training.
absl::Status LocalTrainer::ReportStep(int64_t epoch, double loss) {
  ++window_steps_;
  if (dist_ == nullptr || !dist_->on_step) return absl::OkStatus();
  // Heartbeats go out every interval (>= 100 ms), so fresher progress is
  // never seen; small models take microseconds a step.
  const absl::Time now = absl::Now();
  if (now - last_report_ < absl::Milliseconds(100)) return absl::OkStatus();
  last_report_ = now;
  WorkerProgress p;
  const double dt = Seconds(window_start_);
  FillProgress(step_, epoch, loss, dt > 0 ? window_samples_ / dt : 0, result_,
               &p);
  StepTimes* t = p.mutable_times();
  t->set_data_s(times_.data_s() / window_steps_);
  t->set_compute_s(times_.compute_s() / window_steps_);
  t->set_comm_wait_s(times_.comm_wait_s() / window_steps_);
  t->set_optimizer_s(times_.optimizer_s() / window_steps_);
  p.set_bytes_allreduced(bytes_reduced_);
  p.set_restored_step(restored_step_);
  if (window_comm_s_ > 0) {
    // nccl-tests' bus bandwidth: what each link carried in a ring.
    const double w = dist_->world_size;
    p.set_busbw_gbps(window_bytes_ / window_comm_s_ * 2 * (w - 1) / w / 1e9);
  }
  if (dt >= 1.0) {  // a fresh window every second
    window_bytes_ = 0;
    window_comm_s_ = 0;
    times_.Clear();
    window_steps_ = 0;
    window_samples_ = 0;
    window_start_ = absl::Now();
  }
  return dist_->on_step(p);
}

double LocalTrainer::AccountStep(int64_t epoch, int count, EpochResult& er,
                                 Progress& progress) {
  double loss = 0;
  for (int r = 0; r < count; ++r) {
    const Replica& rep = replicas_[r];
    loss += rep.loss / count;
    epoch_correct_ += rep.correct;
    epoch_seen_ += rep.seen;
    result_.samples += rep.seen;
    window_samples_ += rep.seen;
  }
  epoch_loss_sum_ += loss;
  recent_losses_.push_back(loss);
  ++step_;
  ++er.steps;
  progress.Step(epoch, er.steps, StepsPerEpoch(), step_, TotalSteps(),
                result_.samples, loss);
  return loss;
}

absl::StatusOr<EpochResult> LocalTrainer::TrainEpoch(int64_t epoch,
                                                     Progress& progress) {
  if (SharedData()) return TrainSharedEpoch(epoch, progress);
  RETURN_IF_ERROR(StartEpoch(epoch));
  const int R = options_.replicas;
  EpochResult er;
  er.epoch = epoch;
  const int64_t total = TotalSteps();
  const absl::Time start = absl::Now();
  const std::function<void(int)> step_fn = [this](int r) { ReplicaStep(r); };
  // Every replica has the same number of batches (the sampler pads), so
  // all of them stop together and no step is begun that cannot finish.
  if (epoch == start_epoch_) er.steps = start_epoch_steps_;
  const int64_t first = er.steps;
  const int64_t batches = er.steps + replicas_[0].loader->num_batches();
  const int64_t per_step = spec_.batch_size() * TotalReplicas();
  cur_epoch_ = epoch;
  cur_position_ = segment_start_;
  cur_epoch_steps_ = er.steps;
  while (er.steps < batches && !StepLimitReached()) {
    if (options_.stop_after_steps > 0 &&
        steps_this_run_ >= options_.stop_after_steps) {
      return absl::CancelledError("stopped as asked (stop_after_steps)");
    }
    SeedStep();
    const double lr =
        LearningRate(spec_.optimizer(), spec_.lr_schedule(), step_, total);
    if (sync_ != nullptr) sync_->BeginStep();
    if (PsMode()) PsBeginPush(step_, lr, R, 0);
    pool_.Run(step_fn);
    CHECK(!replicas_[0].done) << "a loader ended before num_batches()";
    SlowDown();
    if (sync_ != nullptr) RETURN_IF_ERROR(SynchronizeGradients());
    if (PsMode()) {
      RETURN_IF_ERROR(PsFinishPush());
      RETURN_IF_ERROR(PsPull(step_ + 1));
    } else {
      const absl::Time t = absl::Now();
      const bool reduce_local = sync_ == nullptr;
      RETURN_IF_ERROR(ReduceAndStep(lr, reduce_local));
      Trace("optimizer", Timeline::kStepLane, t);
      times_.set_optimizer_s(times_.optimizer_s() + Seconds(t));
    }
    const double loss = AccountStep(epoch, R, er, progress);
    cur_epoch_steps_ = er.steps;
    cur_position_ = std::min(data_.train->size(),
                             segment_start_ + (er.steps - first) * per_step);
    ++steps_this_run_;
    RETURN_IF_ERROR(MaybeCheckpoint(epoch, er.steps, batches));
    RETURN_IF_ERROR(ReportStep(epoch, loss));
    if (StopSignalled()) return StopWithFinalCheckpoint();
  }
  epoch_complete_ = er.steps >= batches;
  if (epoch_complete_) {
    cur_epoch_ = epoch + 1;
    cur_position_ = 0;
    cur_epoch_steps_ = 0;
  }
  er.seconds = Seconds(start);
  for (Replica& rep : replicas_) rep.loader.reset();
  return er;
}

// Shared data (SSP and ASYNC): claim up to one chunk per local replica,
// pull the parameters for their round, compute, push; until the epoch's
// chunks run out. A fast worker simply claims more often than a slow one.
absl::StatusOr<EpochResult> LocalTrainer::TrainSharedEpoch(int64_t epoch,
                                                           Progress& progress) {
  RETURN_IF_ERROR(StartSharedEpoch(epoch));
  const int R = options_.replicas;
  const int64_t TR = TotalReplicas();
  const int64_t chunks = StepsPerEpoch() * TR;
  const int64_t total = TotalSteps();
  EpochResult er;
  er.epoch = epoch;
  const absl::Time start = absl::Now();
  while (!StepLimitReached()) {
    ASSIGN_OR_RETURN(const int64_t first, dist_->claim_chunks(epoch, R));
    // The run-wide number of the first chunk, and how many are real.
    const int64_t global = epoch * chunks + first;
    int64_t count = std::min<int64_t>(R, chunks - first);
    if (max_steps_ > 0) count = std::min(count, max_steps_ * TR - global);
    if (count <= 0) break;
    const int64_t round = global / TR;
    next_round_ = (global + count - 1) / TR + 1;
    RETURN_IF_ERROR(PsPull(round));
    const double lr =
        LearningRate(spec_.optimizer(), spec_.lr_schedule(), round, total);
    PsBeginPush(round, lr, static_cast<int>(count), global);
    pool_.Run([&](int r) {
      if (r < count) ChunkStep(r, first + r);
    });
    SlowDown();
    RETURN_IF_ERROR(PsFinishPush());
    RETURN_IF_ERROR(ReportStep(epoch, AccountStep(epoch, count, er, progress)));
    if (StopSignalled()) return StopWithFinalCheckpoint();
  }
  // Evaluation and the final parameters are the shards' current ones, not
  // those this worker's last step began from.
  RETURN_IF_ERROR(PsPull(next_round_));
  er.seconds = Seconds(start);
  return er;
}

void LocalTrainer::SeedStep() {
  for (int r = 0; r < options_.replicas; ++r) {
    replicas_[r].model->SeedRandom(spec_.seed() * 1000003 +
                                   GlobalReplica(r) * 7919 + step_);
  }
}

// The flat parameters, every optimizer state tensor as one flat tensor
// (slices concatenated, so a checkpoint does not depend on the number of
// replicas; Adam's step counter once), and the BatchNorm statistics.
std::vector<std::pair<std::string, int64_t>> LocalTrainer::StateLayout() const {
  std::vector<std::pair<std::string, int64_t>> layout;
  const int64_t n = replicas_[0].model->params().size();
  layout.emplace_back("params", n);
  const Slice& s0 = slices_[0];
  const std::vector<Tensor*> states = s0.optimizer->State();
  for (size_t k = 0; k < states.size(); ++k) {
    const bool per_element = states[k]->size() == s0.end - s0.begin;
    layout.emplace_back(absl::StrCat("optimizer.", k),
                        per_element ? n : states[k]->size());
  }
  const std::vector<Tensor*> buffers = replicas_[0].model->Buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    layout.emplace_back(absl::StrCat("buffer.", i), buffers[i]->size());
  }
  return layout;
}

Checkpoint LocalTrainer::Capture(int64_t epoch, int64_t position,
                                 int64_t epoch_steps) {
  Checkpoint c;
  c.step = step_;
  c.epoch = epoch;
  c.epoch_offset = position;
  c.spec_hash = TrainingHash(spec_);
  c.metadata["job"] = spec_.name();
  c.metadata["epoch_steps"] = absl::StrCat(epoch_steps);
  const Tensor& p = replicas_[0].model->params();
  c.tensors.push_back({"params", {p.size()}, {p.data(), p.data() + p.size()}});
  const size_t states = slices_[0].optimizer->State().size();
  for (size_t k = 0; k < states; ++k) {
    CheckpointTensor t;
    t.name = absl::StrCat("optimizer.", k);
    for (Slice& s : slices_) {
      const Tensor* state = s.optimizer->State()[k];
      const bool per_element = state->size() == s.end - s.begin;
      if (!per_element && !t.values.empty()) continue;  // a counter, once
      t.values.insert(t.values.end(), state->data(),
                      state->data() + state->size());
    }
    t.shape = {static_cast<int64_t>(t.values.size())};
    c.tensors.push_back(std::move(t));
  }
  std::vector<Tensor*> buffers = replicas_[0].model->Buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Tensor& b = *buffers[i];
    c.tensors.push_back({absl::StrCat("buffer.", i),
                         {b.size()},
                         {b.data(), b.data() + b.size()}});
  }
  return c;
}

absl::Status LocalTrainer::FlattenState(const Checkpoint& c,
                                        std::vector<float>* out) const {
  out->clear();
  for (const auto& [name, size] : StateLayout()) {
    auto t = std::find_if(
        c.tensors.begin(), c.tensors.end(),
        [&name = name](const CheckpointTensor& t) { return t.name == name; });
    if (t == c.tensors.end()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint has no tensor ", name));
    }
    if (static_cast<int64_t>(t->values.size()) != size) {
      return absl::DataLossError(
          absl::StrCat("checkpoint tensor ", name, " has ", t->values.size(),
                       " values, the model needs ", size));
    }
    out->insert(out->end(), t->values.begin(), t->values.end());
  }
  return absl::OkStatus();
}

absl::Status LocalTrainer::Restore(const Checkpoint& c) {
  std::vector<float> flat;
  RETURN_IF_ERROR(FlattenState(c, &flat));
  int64_t epoch_steps = 0;
  auto it = c.metadata.find("epoch_steps");
  if (it != c.metadata.end() && !absl::SimpleAtoi(it->second, &epoch_steps)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint metadata epoch_steps is not a number: ", it->second));
  }
  if (c.epoch < 0 || c.epoch_offset < 0 ||
      c.epoch_offset > data_.train->size() || epoch_steps < 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint's sampler position (epoch ", c.epoch, ", sample ",
        c.epoch_offset, ", step ", epoch_steps, ") does not fit the ",
        data_.train->size(), " training samples"));
  }
  const float* from = flat.data();
  Tensor& p = replicas_[0].model->params();
  std::copy(from, from + p.size(), p.data());
  from += p.size();
  const size_t states = slices_[0].optimizer->State().size();
  for (size_t k = 0; k < states; ++k) {
    const bool per_element = slices_[0].optimizer->State()[k]->size() ==
                             slices_[0].end - slices_[0].begin;
    for (Slice& s : slices_) {
      Tensor* state = s.optimizer->State()[k];
      const float* src = from + (per_element ? s.begin : 0);
      std::copy(src, src + state->size(), state->data());
    }
    from += per_element ? p.size() : slices_[0].optimizer->State()[k]->size();
  }
  for (Tensor* b : replicas_[0].model->Buffers()) {
    std::copy(from, from + b->size(), b->data());
    from += b->size();
  }
  step_ = c.step;
  restored_step_ = c.step;
  start_epoch_ = c.epoch;
  start_position_ = c.epoch_offset;
  start_epoch_steps_ = epoch_steps;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Checkpoint>> LocalTrainer::ResumeCandidate() {
  std::optional<Checkpoint> best;
  if (!checkpoint_dir_.empty() && !PsMode()) {
    std::vector<std::string> rejected;
    absl::StatusOr<Checkpoint> c =
        LoadLatestCheckpoint(checkpoint_dir_, &rejected);
    for (const std::string& why : rejected) {
      std::fprintf(stderr, "cohort: skipping a bad checkpoint: %s\n",
                   why.c_str());
    }
    if (!c.ok() && !absl::IsNotFound(c.status())) return c.status();
    if (c.ok()) {
      if (c->spec_hash != TrainingHash(spec_)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the checkpoints in ", checkpoint_dir_,
            " were written by a job with another model, data, optimizer, "
            "batch size, loss or seed; use another checkpoint directory"));
      }
      best = *std::move(c);
    }
  }
  const ElasticState* e = options_.elastic;
  if (e != nullptr && e->snapshot &&
      (!best || e->snapshot->step > best->step)) {
    best = e->snapshot;
  }
  if (best) {
    // A state this model cannot take is refused here, before any peer
    // waits for it.
    std::vector<float> flat;
    RETURN_IF_ERROR(FlattenState(*best, &flat));
  }
  return best;
}

absl::Status LocalTrainer::Resume() {
  ASSIGN_OR_RETURN(std::optional<Checkpoint> mine, ResumeCandidate());
  if (dist_ != nullptr && !PsMode() && dist_->comm != nullptr) {
    return AgreeOnState(mine);
  }
  if (!mine) return absl::OkStatus();  // a fresh run
  RETURN_IF_ERROR(Restore(*mine));
  if (!options_.quiet) {
    std::fprintf(
        stderr,
        "cohort: resuming from step %lld (epoch %lld, sample %lld) "
        "of %s\n",
        static_cast<long long>(step_), static_cast<long long>(start_epoch_ + 1),
        static_cast<long long>(start_position_), checkpoint_dir_.c_str());
  }
  return absl::OkStatus();
}

namespace {

// Non-negative integers travel through a float sum as four 16-bit pieces,
// each exact in a float; a sum with zeros from every other rank is exact.
constexpr int kIntFloats = 4;

void PutInt(int64_t v, float* out) {
  for (int i = 0; i < kIntFloats; ++i) {
    out[i] =
        static_cast<float>((static_cast<uint64_t>(v) >> (16 * i)) & 0xffff);
  }
}

int64_t GetInt(const float* in) {
  uint64_t v = 0;
  for (int i = 0; i < kIntFloats; ++i) {
    v |= static_cast<uint64_t>(in[i]) << (16 * i);
  }
  return static_cast<int64_t>(v);
}

}  // namespace

// Every rank holds the same state after the same step in a synchronous
// job, so whichever rank holds the newest one can give it to the others.
// Both collectives are sums in which only one rank adds non-zero values,
// which is a broadcast the Communicator interface already has.
absl::Status LocalTrainer::AgreeOnState(const std::optional<Checkpoint>& mine) {
  const absl::Time start = absl::Now();
  const int world = dist_->world_size;
  std::vector<float> steps(world * kIntFloats, 0.0f);
  if (mine) PutInt(mine->step + 1, &steps[dist_->rank * kIntFloats]);
  RETURN_IF_ERROR(dist_->comm->AllReduceSum(steps.data(), steps.size()));
  int source = -1;
  int64_t newest = 0;
  for (int w = 0; w < world; ++w) {
    const int64_t v = GetInt(&steps[w * kIntFloats]);
    if (v > newest) {
      newest = v;
      source = w;
    }
  }
  if (source < 0) return absl::OkStatus();  // nobody has trained yet
  Trace("agree on state", Timeline::kStepLane, start);
  constexpr int kHeader = 4 * kIntFloats;
  std::vector<float> flat;
  if (dist_->rank == source) {
    RETURN_IF_ERROR(FlattenState(*mine, &flat));
    int64_t epoch_steps = 0;
    auto it = mine->metadata.find("epoch_steps");
    if (it != mine->metadata.end()) {
      (void)absl::SimpleAtoi(it->second, &epoch_steps);
    }
    flat.insert(flat.begin(), kHeader, 0.0f);
    PutInt(mine->step, &flat[0]);
    PutInt(mine->epoch, &flat[kIntFloats]);
    PutInt(mine->epoch_offset, &flat[2 * kIntFloats]);
    PutInt(std::max<int64_t>(0, epoch_steps), &flat[3 * kIntFloats]);
  } else {
    int64_t n = kHeader;
    for (const auto& entry : StateLayout()) n += entry.second;
    flat.assign(n, 0.0f);
  }
  RETURN_IF_ERROR(dist_->comm->AllReduceSum(flat.data(), flat.size()));
  Checkpoint c;
  c.step = GetInt(&flat[0]);
  c.epoch = GetInt(&flat[kIntFloats]);
  c.epoch_offset = GetInt(&flat[2 * kIntFloats]);
  c.metadata["epoch_steps"] = absl::StrCat(GetInt(&flat[3 * kIntFloats]));
  const float* from = flat.data() + kHeader;
  for (const auto& [name, size] : StateLayout()) {
    c.tensors.push_back({name, {size}, {from, from + size}});
    from += size;
  }
  RETURN_IF_ERROR(Restore(c));
  if (!options_.quiet) {
    std::fprintf(stderr,
                 "cohort: starting from step %lld (epoch %lld, sample %lld), "
                 "the newest state in the job, held by rank %d\n",
                 static_cast<long long>(step_),
                 static_cast<long long>(start_epoch_ + 1),
                 static_cast<long long>(start_position_), source);
  }
  return absl::OkStatus();
}

absl::Status LocalTrainer::StopWithFinalCheckpoint() {
  std::string where;
  if (Checkpoints()) {
    CheckpointWriteOptions o;
    o.keep = spec_.checkpoint().keep();
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(WriteCheckpoint(
        checkpoint_dir_, Capture(cur_epoch_, cur_position_, cur_epoch_steps_),
        o));
    Trace("checkpoint", Timeline::kStepLane, start, absl::Now(),
          absl::StrCat("\"step\": ", step_, ", \"final\": true"));
    where = absl::StrCat("; final checkpoint in ", checkpoint_dir_);
  }
  return absl::CancelledError(absl::StrCat(
      "stopped by a termination signal after step ", step_, where));
}

void LocalTrainer::SaveForNextGeneration() {
  ElasticState* e = options_.elastic;
  if (e == nullptr || PsMode()) return;
  e->snapshot = Capture(cur_epoch_, cur_position_, cur_epoch_steps_);
  TrainResult& c = e->carried;
  c.samples += result_.samples;
  c.train_seconds += result_.train_seconds;
  c.eval_seconds += result_.eval_seconds;
  c.skipped_steps += result_.skipped_steps;
  c.epoch_results.insert(c.epoch_results.end(), result_.epoch_results.begin(),
                         result_.epoch_results.end());
}

void LocalTrainer::AddCarried() {
  const ElasticState* e = options_.elastic;
  if (e == nullptr) return;
  const TrainResult& c = e->carried;
  result_.samples += c.samples;
  result_.train_seconds += c.train_seconds;
  result_.eval_seconds += c.eval_seconds;
  result_.skipped_steps += c.skipped_steps;
  result_.epoch_results.insert(result_.epoch_results.begin(),
                               c.epoch_results.begin(), c.epoch_results.end());
  // Epochs begun over all generations.
  result_.epochs = std::max<int64_t>(
      result_.epochs, cur_epoch_ + (cur_epoch_steps_ > 0 ? 1 : 0));
}

absl::Status LocalTrainer::MaybeCheckpoint(int64_t epoch,
                                           int64_t steps_in_epoch,
                                           int64_t batches) {
  if (!Checkpoints()) return absl::OkStatus();
  const CheckpointSpec& cs = spec_.checkpoint();
  const bool by_steps = cs.every_steps() > 0 && step_ % cs.every_steps() == 0;
  const bool by_time =
      cs.every_seconds() > 0 &&
      absl::Now() - last_checkpoint_ >= absl::Seconds(cs.every_seconds());
  if (!by_steps && !by_time) return absl::OkStatus();
  // A finished epoch resumes at the start of the next one.
  const bool epoch_done = steps_in_epoch >= batches;
  CheckpointWriteOptions o;
  o.keep = cs.keep();
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(WriteCheckpoint(
      checkpoint_dir_,
      epoch_done ? Capture(epoch + 1, 0, 0)
                 : Capture(epoch, cur_position_, steps_in_epoch),
      o));
  last_checkpoint_ = absl::Now();
  Trace("checkpoint", Timeline::kStepLane, start, last_checkpoint_,
        absl::StrCat("\"step\": ", step_));
  return absl::OkStatus();
}

// Averages BatchNorm statistics over workers, so that every worker
// evaluates (and would checkpoint) the same model.
absl::Status LocalTrainer::AverageBuffersAcrossWorkers() {
  if (!EvaluateAcrossWorkers()) return absl::OkStatus();
  for (Tensor* b : replicas_[0].model->Buffers()) {
    RETURN_IF_ERROR(dist_->comm->AllReduceSum(b->data(), b->size()));
    const float scale = 1.0f / dist_->world_size;
    for (int64_t i = 0; i < b->size(); ++i) (*b)[i] *= scale;
  }
  return absl::OkStatus();
}

// Every replica of the job evaluates its share of the test set; the sums
// are then added up across workers.
absl::Status LocalTrainer::Evaluate(EpochResult* result) {
  const int R = options_.replicas;
  RETURN_IF_ERROR(AverageBuffersAcrossWorkers());
  // Replicas saw different data, so their BatchNorm statistics differ;
  // replica 0's are the model's (as with DDP's broadcast from rank 0).
  std::vector<Tensor*> master = replicas_[0].model->Buffers();
  for (int r = 1; r < R; ++r) {
    std::vector<Tensor*> b = replicas_[r].model->Buffers();
    for (size_t i = 0; i < b.size(); ++i) b[i]->CopyFrom(*master[i]);
  }
  const int64_t n = data_.test->size();
  const bool across = EvaluateAcrossWorkers();
  const int64_t G = across ? TotalReplicas() : R;
  const int64_t batch = spec_.eval().batch_size();
  std::vector<double> loss(R, 0);
  std::vector<int64_t> correct(R, 0);
  pool_.Run([&](int r) {
    const int64_t g = across ? GlobalReplica(r) : r;
    std::vector<int64_t> idx;
    for (int64_t i = n * g / G; i < n * (g + 1) / G; ++i) idx.push_back(i);
    Loader loader(data_.test.get(), std::move(idx), batch, false,
                  BatchLayout::kBatchInner, 1, 2);
    Batch b;
    while (loader.Next(&b)) {
      const Tensor& out = replicas_[r].model->Forward(b.features, Mode::kEval);
      int64_t c = 0;
      loss[r] += SoftmaxCrossEntropy<float>(out, b.labels, nullptr, &c) *
                 b.labels.size();
      correct[r] += c;
    }
  });
  // Float sums are exact for counts below 2^24 test samples.
  float sums[2] = {0, 0};
  for (int r = 0; r < R; ++r) {
    sums[0] += static_cast<float>(loss[r]);
    sums[1] += static_cast<float>(correct[r]);
  }
  if (across) RETURN_IF_ERROR(dist_->comm->AllReduceSum(sums, 2));
  result->test_loss = n > 0 ? sums[0] / n : 0;
  result->test_accuracy = n > 0 ? sums[1] / n : 0;
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> LocalTrainer::Run() {
  absl::StatusOr<TrainResult> result = RunEpochs();
  if (!result.ok() && StopSignalled() && FailedInCollective(result.status())) {
    // Every worker of a job deleted at once gets the signal, but not at the
    // same step: a peer that stopped first fails this worker's next
    // collective. Nothing of that step was applied (the collective comes
    // before the optimizer), so stop as if at the step boundary.
    return StopWithFinalCheckpoint();
  }
  if (!result.ok()) SaveForNextGeneration();
  return result;
}

absl::StatusOr<TrainResult> LocalTrainer::RunEpochs() {
  Progress progress(options_.live_progress, options_.quiet,
                    options_.log_every_seconds, spec_.batch_size());
  if (PsMode()) {
    const absl::Time t = absl::Now();
    RETURN_IF_ERROR(PsSetup());
    result_.setup_seconds += Seconds(t);
  }
  const absl::Time training_start = absl::Now();
  for (int64_t epoch = start_epoch_; epoch < epochs_; ++epoch) {
    if (StepLimitReached()) break;
    epoch_loss_sum_ = 0;
    epoch_correct_ = 0;
    epoch_seen_ = 0;
    ASSIGN_OR_RETURN(EpochResult er, TrainEpoch(epoch, progress));
    er.train_loss = er.steps > 0 ? epoch_loss_sum_ / er.steps : 0;
    er.train_accuracy =
        epoch_seen_ > 0 ? static_cast<double>(epoch_correct_) / epoch_seen_ : 0;
    result_.train_seconds += er.seconds;
    ++result_.epochs;
    // With shared data a worker's share of an epoch varies; the epoch ends
    // (and is evaluated) when its chunks run out.
    const bool epoch_complete =
        SharedData() ? !StepLimitReached() : epoch_complete_;
    if (!spec_.eval().disable() && data_.test->size() > 0 &&
        spec_.loss() == CROSS_ENTROPY &&
        (epoch_complete || StepLimitReached())) {
      const absl::Time t = absl::Now();
      RETURN_IF_ERROR(Evaluate(&er));
      Trace("evaluate", Timeline::kStepLane, t);
      result_.eval_seconds += Seconds(t);
      result_.test_accuracy = er.test_accuracy;
      result_.test_loss = er.test_loss;
    }
    er.wall_seconds = Seconds(training_start);
    progress.EpochDone(er.epoch, er.train_loss, er.test_accuracy, er.seconds);
    result_.epoch_results.push_back(er);
  }
  AddCarried();
  FinishResult(step_, recent_losses_, &result_);
  if (options_.final_parameters != nullptr) {
    const Tensor& p = replicas_[0].model->params();
    options_.final_parameters->assign(p.data(), p.data() + p.size());
  }
  return result_;
}

}  // namespace

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
  }
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const JobSpec& spec, const TrainOptions& options) {
  if (!options.gpus.empty()) {
    ASSIGN_OR_RETURN(const GpuPluginApi* gpu, LoadGpuPlugin());
    return gpu->create_trainer(spec, options);
  }
  if (spec.precision() == BF16) {
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
  if (d != nullptr && d->ps_mode &&
      (!d->ps_setup || !d->ps_push_begin || !d->ps_push_ready ||
       !d->ps_push_finish || !d->ps_pull)) {
    return absl::InvalidArgumentError(
        "parameter-server mode needs ps_setup, ps_push_begin, ps_push_ready, "
        "ps_push_finish and ps_pull");
  }
  if (d != nullptr && d->ps_mode && spec.ps().consistency() != SYNC &&
      !d->claim_chunks) {
    return absl::InvalidArgumentError(
        "SSP and ASYNC parameter-server modes need claim_chunks");
  }
  if (!(options.min_step_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_step_seconds must be >= 0, got ", options.min_step_seconds));
  }
  auto trainer = std::make_unique<LocalTrainer>(spec, options);
  RETURN_IF_ERROR(trainer->Setup());
  return trainer;
}

absl::StatusOr<TrainResult> Train(const JobSpec& spec,
                                  const TrainOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                   Trainer::Create(spec, options));
  return trainer->Run();
}

}  // namespace cohort
