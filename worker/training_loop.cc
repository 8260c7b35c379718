#include "worker/training_loop.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/data/loader.h"
#include "worker/data/sampler.h"
#include "worker/data/splitmix.h"
#include "worker/optim/lr_schedule.h"
#include "worker/timeline.h"

namespace cohort {
namespace {

double Seconds(absl::Time since) {
  return absl::ToDoubleSeconds(absl::Now() - since);
}

// How much later than a peer's a worker's own stop signal may arrive when
// a job is deleted (one kill per process, in some order).
constexpr absl::Duration kSignalSkew = absl::Milliseconds(250);

// The codes a collective fails with when a peer goes away.
bool FailedInCollective(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kAborted ||
         s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kInternal;
}

// What the exchange needs of a step.
ExchangeStep ForExchange(const StepPlan& plan, int64_t first_chunk) {
  ExchangeStep ex;
  ex.clock = plan.step;
  ex.lr = plan.lr;
  ex.active = plan.active;
  ex.first_chunk = first_chunk;
  return ex;
}

}  // namespace

// One loader per local replica over its share of an epoch's order.
class TrainingLoop::LoaderSource : public BatchSource {
 public:
  bool Next(int replica, Batch* batch) override {
    return loaders_[replica]->Next(batch);
  }
  std::vector<std::unique_ptr<Loader>> loaders_;
};

// Shared data: replica r computes chunk first + r of the epoch, decoding it
// on its own thread (a claim is known only just before its step, so
// nothing prefetches; decoding a batch takes a few percent of its step).
// With gradient accumulation a chunk is `micro_` consecutive batches of the
// replica's samples (fewer at the epoch's end), read one per Next().
class TrainingLoop::ChunkSource : public BatchSource {
 public:
  bool Next(int replica, Batch* batch) override {
    const int64_t chunk = first_ + replica;
    const std::vector<int64_t>& indices = indices_[chunk % replicas()];
    const int64_t step = chunk / replicas();
    const int64_t first = std::min<int64_t>(
        (step * micro_ + taken_[replica]) * batch_, indices.size());
    const int64_t end = std::min<int64_t>(first + batch_, indices.size());
    ++taken_[replica];
    FillBatch(*data_, absl::MakeConstSpan(indices.data() + first, end - first),
              layout_, batch, &scratch_[replica], nullptr, read_);
    batch->step_in_epoch = step;
    return true;
  }
  int Batches(int replica, int planned) override {
    const int64_t chunk = first_ + replica;
    const int64_t left = static_cast<int64_t>(indices_[0].size()) -
                         chunk / replicas() * micro_ * batch_;
    return static_cast<int>(std::clamp<int64_t>(
        (left + batch_ - 1) / batch_, 1, std::min<int64_t>(planned, micro_)));
  }
  // Chunks [first, first + local replicas) are this step's.
  void StartStep(int64_t first) {
    first_ = first;
    std::fill(taken_.begin(), taken_.end(), 0);
  }
  int64_t replicas() const { return static_cast<int64_t>(indices_.size()); }

  const Dataset* data_ = nullptr;
  BatchLayout layout_ = BatchLayout::kBatchInner;
  int64_t batch_ = 1;
  int64_t micro_ = 1;
  int64_t first_ = 0;
  ReadOptions read_;
  // Every global replica's samples of the epoch (the sampler pads them to
  // one length); decoding buffers; batches each local replica read of its
  // chunk.
  std::vector<std::vector<int64_t>> indices_;
  std::vector<std::vector<float>> scratch_;
  std::vector<int64_t> taken_;
};

absl::Status TrainingLoop::Setup(const EngineFactory& make_engine) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(data_,
                   LoadDataset(spec_.data(), options_.data_dir, spec_.seed()));
  objective_.emplace(spec_, *data_.test);
  if (Evaluates()) {
    control_.emplace(ControlMetric(spec_.eval(), data_.test->float_targets()),
                     spec_.eval().early_stopping_patience(),
                     spec_.eval().min_delta());
  }
  ASSIGN_OR_RETURN(engine_, make_engine(spec_, options_, data_));
  ASSIGN_OR_RETURN(exchange_, engine_->CreateExchange());
  RETURN_IF_ERROR(ReadLimits());
  RETURN_IF_ERROR(Resume());
  RETURN_IF_ERROR(OpenLog());
  cur_epoch_ = start_epoch_;
  cur_position_ = start_position_;
  cur_epoch_steps_ = start_epoch_steps_;
  last_checkpoint_ = absl::Now();
  result_.job_name = spec_.name();
  result_.model = spec_.model().zoo().empty() ? "custom" : spec_.model().zoo();
  result_.parameters = engine_->num_parameters();
  result_.replicas = engine_->replicas();
  result_.threads =
      options_.gpus.empty() ? options_.threads : engine_->replicas();
  result_.setup_seconds = Seconds(start);
  window_start_ = absl::Now();
  return absl::OkStatus();
}

// Epochs, steps per epoch, max_steps and the checkpoint directory.
absl::Status TrainingLoop::ReadLimits() {
  DistributedSampler sampler(data_.train->size(), TotalReplicas(), 0,
                             spec_.seed(), true, spec_.drop_last());
  const int64_t n = sampler.num_samples();
  const int64_t b = spec_.batch_size();
  accumulation_ = std::max(1, spec_.gradient_accumulation_steps());
  steps_per_epoch_ = std::max<int64_t>(
      1, StepsOf(spec_.drop_last() ? n / b : (n + b - 1) / b));
  epochs_ = options_.epochs >= 0 ? options_.epochs : spec_.epochs();
  // The spec's max_steps 0 means no limit; an option of 0 means no step.
  max_steps_ = options_.max_steps >= 0 ? options_.max_steps
               : spec_.max_steps() > 0 ? spec_.max_steps()
                                       : -1;
  if (epochs_ <= 0 && max_steps_ < 0) {
    return absl::InvalidArgumentError(
        "nothing to train: epochs is 0 and there is no max_steps");
  }
  if (epochs_ <= 0) {
    epochs_ = (max_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  }
  // Without every_steps or every_seconds, only the final checkpoint.
  checkpoint_dir_ = !options_.checkpoint_dir.empty() ? options_.checkpoint_dir
                                                     : spec_.checkpoint().dir();
  if (spec_.checkpoint().keep_best() && checkpoint_dir_.empty()) {
    return absl::InvalidArgumentError(
        "checkpoint.keep_best needs a checkpoint directory (checkpoint.dir, "
        "or --checkpoint-dir) to keep the best checkpoint in");
  }
  // Found out now, not at the first checkpoint after hours of training.
  if (Checkpoints()) {
    if (absl::Status s = CheckCanWriteDir(checkpoint_dir_); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint directory: ", s.message()));
    }
  }
  return absl::OkStatus();
}

int64_t TrainingLoop::StepsOf(int64_t batches) const {
  return spec_.drop_last() ? batches / accumulation_
                           : (batches + accumulation_ - 1) / accumulation_;
}

int64_t TrainingLoop::TotalSteps() const {
  const int64_t by_epochs = epochs_ * steps_per_epoch_;
  return max_steps_ >= 0 ? std::min(max_steps_, by_epochs) : by_epochs;
}

void TrainingLoop::Trace(absl::string_view name, int lane, absl::Time start,
                         absl::Time end, absl::string_view args) {
  if (options_.timeline != nullptr) {
    options_.timeline->Add(name, lane, start, end, args);
  }
}

// Stretches this step's forward and backward to max(their time,
// min_step_seconds) times slowdown by sleeping, counted as compute: the
// worker behaves as slower hardware of its own would.
void TrainingLoop::SlowDown(double compute_s) {
  const double base = std::max(compute_s, options_.min_step_seconds);
  const double extra = base * options_.slowdown - compute_s;
  if (extra <= 0) return;
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Seconds(extra));
  Trace("slowdown sleep", Timeline::kStepLane, start);
  times_.set_compute_s(times_.compute_s() + extra);
}

absl::Status TrainingLoop::FinishExchange() {
  const absl::Time t = absl::Now();
  absl::Status s = exchange_->Finish();
  Trace(exchange_->finish_name(),
        exchange_->finish_on_bucket_lane() ? Timeline::kBucketLane
                                           : Timeline::kStepLane,
        t);
  times_.set_comm_wait_s(times_.comm_wait_s() + Seconds(t));
  TakeExchangeStats(/*in_window=*/true);
  return s;
}

void TrainingLoop::TakeExchangeStats(bool in_window) {
  const ExchangeStats stats = exchange_->TakeStats();
  bytes_reduced_ += stats.bytes;
  if (!in_window) return;
  window_bytes_ += stats.bytes;
  window_comm_s_ += stats.comm_seconds;
}

// The optimizer on the combined gradient, unless it holds a NaN or an
// infinity (then the job's nonfinite_gradients policy decides).
absl::Status TrainingLoop::Update(const StepPlan& plan) {
  const absl::Time t = absl::Now();
  ASSIGN_OR_RETURN(const bool applied,
                   engine_->Update(plan, !exchange_->CombinesLocalReplicas()));
  grad_norm_ = engine_->grad_norm();
  if (options_.timeline != nullptr) {  // no formatting per step otherwise
    Trace("optimizer", Timeline::kStepLane, t, absl::Now(),
          grad_norm_ >= 0 ? absl::StrCat("\"grad_norm\": ", grad_norm_) : "");
  }
  times_.set_optimizer_s(times_.optimizer_s() + Seconds(t));
  if (applied) return absl::OkStatus();
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

// The shards' parameters for `clock` into the engine's.
absl::Status TrainingLoop::Pull(int64_t clock) {
  const absl::Time t = absl::Now();
  absl::Status s = exchange_->Pull(clock);
  Trace("pull", Timeline::kBucketLane, t, absl::Now(),
        absl::StrCat("\"clock\": ", clock));
  times_.set_comm_wait_s(times_.comm_wait_s() + Seconds(t));
  TakeExchangeStats(/*in_window=*/false);
  return s;
}

// Forward and backward on every replica taking part while the exchange
// combines finished ranges, then the wait for the exchange; returns the
// step's mean loss once accounted.
absl::StatusOr<double> TrainingLoop::Step(const StepPlan& plan,
                                          const ExchangeStep& ex,
                                          BatchSource& source, int64_t epoch,
                                          EpochResult& er, Progress& progress) {
  const absl::Time begin = absl::Now();
  logged_.lr = plan.lr;
  exchange_->BeginStep(ex);
  RETURN_IF_ERROR(engine_->ForwardBackward(plan, source, *exchange_));
  const StepTiming timing = engine_->timing();
  times_.set_data_s(times_.data_s() + timing.data_s);
  times_.set_compute_s(times_.compute_s() + timing.compute_s);
  SlowDown(timing.compute_s);
  RETURN_IF_ERROR(FinishExchange());
  if (!SharedData()) {
    if (exchange_->UpdatesLocally()) {
      RETURN_IF_ERROR(Update(plan));
    } else {
      RETURN_IF_ERROR(Pull(step_ + 1));
    }
  }
  const double loss = AccountStep(epoch, engine_->Results(plan), er, progress);
  logged_.seconds = Seconds(begin);
  return loss;
}

double TrainingLoop::AccountStep(int64_t epoch,
                                 absl::Span<const ReplicaResult> results,
                                 EpochResult& er, Progress& progress) {
  double loss = 0;
  int64_t seen = 0;
  const int count = static_cast<int>(results.size());
  for (const ReplicaResult& r : results) {
    loss += r.loss / count;
    seen += r.seen;
    epoch_correct_ += r.correct;
    epoch_seen_ += r.seen;
    result_.skipped_samples += r.skipped;
    result_.samples += r.seen;
    window_samples_ += r.seen;
  }
  ++window_steps_;
  epoch_loss_sum_ += loss;
  ++epoch_loss_steps_;
  recent_losses_.push_back(loss);
  ++step_;
  ++er.steps;
  logged_.step = step_;
  logged_.epoch = epoch;
  logged_.loss = loss;
  // Every replica of a synchronous step takes as many samples (the
  // sampler pads); with shared data this is an estimate.
  logged_.samples = seen * TotalReplicas() / count;
  progress.Step(epoch, er.steps, steps_per_epoch_, step_, TotalSteps(),
                result_.samples, loss);
  return loss;
}

// One loader per local replica over its share of `epoch` from
// segment_start_ (a resumed epoch deals out the rest of its order over
// this world).
absl::Status TrainingLoop::OpenLoaders(int64_t epoch, LoaderSource* source) {
  uint64_t seed = spec_.seed();
  if (dist_ != nullptr) {
    ASSIGN_OR_RETURN(seed, dist_->epoch_seed(epoch));
  }
  segment_start_ = epoch == start_epoch_ ? start_position_ : 0;
  for (int r = 0; r < engine_->replicas(); ++r) {
    DistributedSampler sampler(data_.train->size(), TotalReplicas(),
                               GlobalReplica(r), seed, true, spec_.drop_last());
    source->loaders_.push_back(std::make_unique<Loader>(
        data_.train.get(), sampler.IndicesFrom(epoch, segment_start_),
        spec_.batch_size(), spec_.drop_last(), engine_->batch_layout(),
        std::max(1, spec_.data().loader_threads()),
        std::max(1, spec_.data().prefetch()), TrainReads(seed, epoch)));
  }
  return absl::OkStatus();
}

// How an epoch's training samples are read: augmentation draws from the
// epoch's seed (the same on every worker, and after a resume).
ReadOptions TrainingLoop::TrainReads(uint64_t seed, int64_t epoch) const {
  ReadOptions read;
  read.draw_seed = SplitMix64Mix(seed ^ SplitMix64Mix(epoch));
  read.skip_bad_samples = spec_.data().skip_bad_samples();
  return read;
}

// Step (or round) `clock` of the run over `active` local replicas; `more`:
// another step of this epoch follows.
StepPlan TrainingLoop::PlanStep(int64_t clock, int active, bool more) const {
  StepPlan plan;
  plan.step = clock;
  plan.lr =
      LearningRate(spec_.optimizer(), spec_.lr_schedule(), clock, TotalSteps());
  // The rule's batch is the step's: replicas x accumulated batches.
  if (spec_.optimizer().scale_lr_with_world()) {
    plan.lr *= TotalReplicas() * accumulation_;
  }
  plan.active = active;
  plan.more = more;
  plan.micro_batches = static_cast<int>(accumulation_);
  return plan;
}

absl::StatusOr<EpochResult> TrainingLoop::TrainEpoch(int64_t epoch,
                                                     Progress& progress) {
  if (SharedData()) return TrainSharedEpoch(epoch, progress);
  LoaderSource source;
  RETURN_IF_ERROR(OpenLoaders(epoch, &source));
  EpochResult er;
  er.epoch = epoch;
  const absl::Time start = absl::Now();
  // Every replica has the same number of batches (the sampler pads), so
  // all of them stop together and no step is begun that cannot finish.
  if (epoch == start_epoch_) er.steps = start_epoch_steps_;
  const int64_t first = er.steps;
  const int64_t micro_batches = source.loaders_[0]->num_batches();
  const int64_t batches = er.steps + StepsOf(micro_batches);
  const int64_t per_step = spec_.batch_size() * accumulation_ * TotalReplicas();
  const double eval_before = result_.eval_seconds;
  cur_epoch_ = epoch;
  cur_position_ = segment_start_;
  cur_epoch_steps_ = er.steps;
  while (er.steps < batches && !StepLimitReached()) {
    if (options_.stop_after_steps > 0 &&
        steps_this_run_ >= options_.stop_after_steps) {
      return absl::CancelledError("stopped as asked (stop_after_steps)");
    }
    engine_->SeedStep(step_);
    StepPlan plan = PlanStep(
        step_, engine_->replicas(),
        er.steps + 1 < batches && (max_steps_ < 0 || step_ + 1 < max_steps_));
    plan.micro_batches = static_cast<int>(std::min(
        accumulation_, micro_batches - (er.steps - first) * accumulation_));
    ASSIGN_OR_RETURN(const double loss, Step(plan, ForExchange(plan, 0), source,
                                             epoch, er, progress));
    cur_epoch_steps_ = er.steps;
    cur_position_ = std::min(data_.train->size(),
                             segment_start_ + (er.steps - first) * per_step);
    ++steps_this_run_;
    // An evaluation across workers waits for the others: the coordinator
    // hears of this step first (a replacement PS shard learns from it that
    // every worker pushed the steps below: server/ps/shard_state.h).
    if (EvaluationDue(er.steps >= batches)) {
      RETURN_IF_ERROR(ReportStep(epoch, loss, /*now=*/true));
    }
    RETURN_IF_ERROR(EvaluateIfDue(er.steps >= batches, progress));
    RETURN_IF_ERROR(MaybeCheckpoint(epoch, er.steps, batches));
    RETURN_IF_ERROR(SaveExchangeState(/*final_step=*/false));
    RETURN_IF_ERROR(ReportStep(epoch, loss));
    if (StopSignalled()) return StopWithFinalCheckpoint();
  }
  epoch_complete_ = er.steps >= batches;
  if (epoch_complete_) {
    cur_epoch_ = epoch + 1;
    cur_position_ = 0;
    cur_epoch_steps_ = 0;
  }
  // Training time only: the epoch's evaluations count apart.
  er.seconds = Seconds(start) - (result_.eval_seconds - eval_before);
  return er;
}

// Shared data (SSP and ASYNC): claim up to one chunk per local replica,
// pull the parameters for their round, compute, push; until the epoch's
// chunks run out. A fast worker simply claims more often than a slow one.
absl::StatusOr<EpochResult> TrainingLoop::TrainSharedEpoch(int64_t epoch,
                                                           Progress& progress) {
  ASSIGN_OR_RETURN(const uint64_t seed, dist_->epoch_seed(epoch));
  const int R = engine_->replicas();
  const int64_t TR = TotalReplicas();
  ChunkSource source;
  source.data_ = data_.train.get();
  source.layout_ = engine_->batch_layout();
  source.batch_ = spec_.batch_size();
  source.micro_ = accumulation_;
  source.read_ = TrainReads(seed, epoch);
  source.scratch_.resize(R);
  source.taken_.resize(R);
  for (int g = 0; g < TR; ++g) {
    DistributedSampler sampler(data_.train->size(), TR, g, seed, true,
                               spec_.drop_last());
    source.indices_.push_back(sampler.Indices(epoch));
  }
  const int64_t chunks = steps_per_epoch_ * TR;
  EpochResult er;
  er.epoch = epoch;
  const absl::Time start = absl::Now();
  while (!StepLimitReached()) {
    ASSIGN_OR_RETURN(const int64_t first, dist_->claim_chunks(epoch, R));
    // The run-wide number of the first chunk, and how many are real.
    const int64_t global = epoch * chunks + first;
    int64_t count = std::min<int64_t>(R, chunks - first);
    if (max_steps_ >= 0) count = std::min(count, max_steps_ * TR - global);
    if (count <= 0) break;
    const int64_t round = global / TR;
    next_round_ = (global + count - 1) / TR + 1;
    RETURN_IF_ERROR(Pull(round));
    const StepPlan plan = PlanStep(round, static_cast<int>(count), false);
    source.StartStep(first);
    ASSIGN_OR_RETURN(const double loss, Step(plan, ForExchange(plan, global),
                                             source, epoch, er, progress));
    RETURN_IF_ERROR(ReportStep(epoch, loss));
    if (StopSignalled()) return StopWithFinalCheckpoint();
  }
  // Evaluation and the final parameters are the shards' current ones, not
  // those this worker's last step began from.
  RETURN_IF_ERROR(Pull(next_round_));
  er.seconds = Seconds(start);
  return er;
}

// Tells the worker process (and through it the coordinator) how training
// goes; its answer may stop training.
absl::Status TrainingLoop::ReportStep(int64_t epoch, double loss, bool now) {
  // The early report before an evaluation is followed by the step's own.
  if (log_ != nullptr && !now) {
    logged_.grad_norm = grad_norm_;
    log_->Step(logged_);
  }
  const bool to_coordinator = dist_ != nullptr && dist_->on_step;
  if (!to_coordinator && !options_.on_progress) return absl::OkStatus();
  // Heartbeats go out every interval (>= 100 ms), so fresher progress is
  // never seen; small models take microseconds a step.
  if (!now && absl::Now() - last_report_ < absl::Milliseconds(100)) {
    return absl::OkStatus();
  }
  last_report_ = absl::Now();
  WorkerProgress p;
  const double dt = Seconds(window_start_);
  FillProgress(step_, epoch, loss, dt > 0 ? window_samples_ / dt : 0, result_,
               &p);
  p.set_lr(PlanStep(std::max<int64_t>(0, step_ - 1), 0, false).lr);
  if (grad_norm_ >= 0) p.set_grad_norm(grad_norm_);
  StepTimes* t = p.mutable_times();
  // A report before an evaluation may have just started a fresh window.
  const double steps = std::max<int64_t>(1, window_steps_);
  t->set_data_s(times_.data_s() / steps);
  t->set_compute_s(times_.compute_s() / steps);
  t->set_comm_wait_s(times_.comm_wait_s() / steps);
  t->set_optimizer_s(times_.optimizer_s() / steps);
  p.set_bytes_allreduced(bytes_reduced_);
  p.set_restored_step(restored_step_);
  if (control_ && control_->state().has_best) {
    p.set_best_metric_name(control_->metric());
    p.set_best_metric(control_->state().best);
    p.set_best_step(control_->state().best_step);
  }
  if (window_comm_s_ > 0) {
    // nccl-tests' bus bandwidth: what each link carried in a ring.
    const double w = dist_ != nullptr ? dist_->world_size : 1;
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
  if (options_.on_progress) options_.on_progress(p);
  return to_coordinator ? dist_->on_step(p) : absl::OkStatus();
}

absl::Status TrainingLoop::MaybeEvaluate(EpochResult& er, bool epoch_complete) {
  if (!Evaluates() || !(epoch_complete || StepLimitReached())) {
    return absl::OkStatus();
  }
  // A synchronous epoch's end was evaluated after its last step (see
  // EvaluateIfDue); shared data's end is known only here.
  if (SharedData() || EvaluationDue(true)) RETURN_IF_ERROR(Evaluate(true));
  er.test_metrics = last_metrics_;
  er.test_loss = result_.test_loss;
  er.test_accuracy = result_.test_accuracy;
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> TrainingLoop::Run() {
  absl::StatusOr<TrainResult> result = RunEpochs();
  if (!result.ok() && options_.stop_signal != nullptr &&
      result.status().code() == absl::StatusCode::kUnavailable) {
    // A peer that left hung up on this worker's collective. When a job is
    // deleted, that peer's stop signal may have come a few milliseconds
    // before this worker's own: give it the time to arrive.
    const absl::Time until = absl::Now() + kSignalSkew;
    while (!StopSignalled() && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
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

// Zero, or what an earlier generation trained of this epoch.
void TrainingLoop::StartEpochTotals(int64_t epoch) {
  epoch_loss_sum_ = 0;
  epoch_loss_steps_ = 0;
  epoch_correct_ = 0;
  epoch_seen_ = 0;
  epoch_start_ = absl::Now();
  const ElasticState* e = options_.elastic;
  if (e != nullptr && e->partial.epoch == epoch && epoch == start_epoch_) {
    epoch_loss_sum_ = e->partial.loss_sum;
    epoch_loss_steps_ = e->partial.steps;
    epoch_correct_ = e->partial.correct;
    epoch_seen_ = e->partial.seen;
  }
}

absl::StatusOr<TrainResult> TrainingLoop::RunEpochs() {
  Progress progress(options_.live_progress, options_.quiet,
                    options_.log_every_seconds, spec_.batch_size());
  const absl::Time setup = absl::Now();
  RETURN_IF_ERROR(exchange_->Setup(engine_->ParamSizes()));
  result_.setup_seconds += Seconds(setup);
  RETURN_IF_ERROR(CatchUpEvaluation(progress));
  const absl::Time training_start = absl::Now();
  for (int64_t epoch = start_epoch_; epoch < epochs_; ++epoch) {
    if (StepLimitReached()) break;
    StartEpochTotals(epoch);
    ASSIGN_OR_RETURN(EpochResult er, TrainEpoch(epoch, progress));
    epoch_start_ = absl::InfinitePast();
    er.train_loss =
        epoch_loss_steps_ > 0 ? epoch_loss_sum_ / epoch_loss_steps_ : 0;
    er.train_accuracy =
        epoch_seen_ > 0 ? static_cast<double>(epoch_correct_) / epoch_seen_ : 0;
    result_.train_seconds += er.seconds;
    ++result_.epochs;
    // With shared data a worker's share of an epoch varies; the epoch ends
    // (and is evaluated) when its chunks run out.
    RETURN_IF_ERROR(MaybeEvaluate(
        er, SharedData() ? !StepLimitReached() : epoch_complete_));
    er.wall_seconds = Seconds(training_start);
    progress.EpochDone(er.epoch, er.train_loss, er.test_metrics, er.seconds);
    result_.epoch_results.push_back(er);
  }
  RETURN_IF_ERROR(FinalCheckpoint());
  RETURN_IF_ERROR(SaveExchangeState(/*final_step=*/true));
  AddCarried();
  FinishResult(step_, recent_losses_, &result_);
  if (step_ > 0 && TotalSteps() > 0) {
    result_.final_lr = PlanStep(step_ - 1, 0, false).lr;
  }
  result_.steps_this_run = steps_this_run_;
  result_.restored_step = restored_ ? restored_step_ : -1;
  FillControlResult();
  if (log_ != nullptr) log_->Close();
  if (options_.final_parameters != nullptr) {
    ASSIGN_OR_RETURN(*options_.final_parameters, engine_->Parameters());
  }
  return result_;
}

}  // namespace cohort
