#include "worker/engine/cpu_engine.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "worker/compute_threads.h"
#include "worker/data/loader.h"
#include "worker/engine/model_state.h"
#include "worker/exchange/allreduce_exchange.h"
#include "worker/exchange/compression.h"
#include "worker/exchange/ps_exchange.h"
#include "worker/exchange/replica_sum.h"
#include "worker/layer_timeline.h"
#include "worker/loss.h"
#include "worker/metrics/gather_by_sum.h"
#include "worker/optim/grad_clip.h"
#include "worker/optim/optimizer.h"
#include "worker/replica_pool.h"
#include "worker/timeline.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// What one replica owns for the whole run.
struct Replica {
  std::unique_ptr<Model<float>> model;
  Batch batch;
  Tensor grad_out;  // dLoss/dOutput
  Tensor target;    // one-hot targets of class data under an elementwise loss
  // Gradient accumulation: the step's earlier batches' gradients, each
  // times its samples (allocated on the first accumulated step).
  std::vector<float> accumulated;
  int64_t accumulated_samples = 0;
  ReplicaResult result;
  bool done = false;   // its source ran out this step
  absl::Status error;  // its batch failed to read this step
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

class CpuEngine : public DeviceEngine {
 public:
  CpuEngine(const JobSpec& spec, const TrainOptions& options,
            const DataSplits& data)
      : spec_(spec),
        options_(options),
        dist_(options.distributed),
        data_(data),
        objective_(spec, *data.test),
        pool_(options.replicas) {}

  absl::Status Build();

  int replicas() const override { return options_.replicas; }
  BatchLayout batch_layout() const override { return BatchLayout::kBatchInner; }
  int64_t num_parameters() const override {
    return replicas_[0].model->num_parameters();
  }
  absl::StatusOr<std::unique_ptr<GradientExchange>> CreateExchange() override;
  std::vector<int64_t> ParamSizes() const override;
  void SeedStep(int64_t step) override;
  absl::Status ForwardBackward(const StepPlan& plan, BatchSource& source,
                               GradientExchange& exchange) override;
  absl::StatusOr<bool> Update(const StepPlan& plan,
                              bool combine_local) override;
  absl::Span<const ReplicaResult> Results(const StepPlan& plan) override;
  StepTiming timing() const override { return timing_; }
  double grad_norm() const override { return grad_norm_; }
  absl::StatusOr<EvalSums> Evaluate(const Dataset& test,
                                    bool across_workers) override;
  std::vector<std::pair<std::string, int64_t>> StateLayout() const override;
  std::string StateNames() const override {
    return StateNamesJson(*replicas_[0].model);
  }
  absl::StatusOr<std::vector<CheckpointTensor>> CaptureState() override;
  absl::Status RestoreState(const std::vector<float>& flat) override;
  absl::StatusOr<std::vector<float>> Parameters() override;

 private:
  void Trace(absl::string_view name, int lane, absl::Time start,
             absl::Time end = absl::Now()) {
    if (options_.timeline != nullptr) {
      options_.timeline->Add(name, lane, start, end);
    }
  }
  int GlobalReplica(int r) const {
    return (dist_ != nullptr ? dist_->replica_offset : 0) + r;
  }
  std::vector<float*> ReplicaGrads() const { return grads_; }
  absl::Status BuildSlices(bool optimizer);
  void ReplicaStep(int r, int batches, BatchSource& source,
                   GradientExchange* exchange);
  // Forward, loss and backward of one batch; `last`: the step's last
  // batch, whose backward finishes the summed gradient range by range.
  void BatchStep(int r, bool last, GradientExchange* exchange);
  // The backward of the step's last batch: each range, as it becomes final,
  // is summed with the earlier batches' (gradient accumulation), measured
  // (replica 0's sum of squares, when squares_in_backward_) and handed to
  // the exchange, all while the rest of backward still runs.
  void LastBackward(int r, GradientExchange* exchange);
  void Accumulate(Replica& rep);
  void FinishAccumulated(Replica& rep, int64_t begin, int64_t end);
  void Loss(Replica& rep, const Tensor& out);
  // Replica r's slice: the local mean (when `combine_local`), and whether
  // the slice's gradient is finite (into slice_finite_[r]).
  void ReduceAndCheck(int r, bool combine_local);
  // Replica r's slice: the clip scale, then the update (elementwise
  // rules), or LAMB's and LARS's pass `pass` (0: piece sums, 1: update).
  void OptimizerStep(int r, double lr, int pass);
  absl::Status AverageBuffersAcrossWorkers();
  absl::Status EvaluateShare(int r, const Dataset& test, int64_t share,
                             int64_t shares, EvalSums* sums);

  const JobSpec spec_;
  const TrainOptions options_;
  const DistributedContext* const dist_;  // null for a single process
  const DataSplits& data_;
  const Objective objective_;
  ReplicaPool pool_;
  std::vector<Replica> replicas_;
  std::vector<std::unique_ptr<LayerTimeline>> layer_traces_;  // per replica
  std::vector<float*> grads_;  // each replica's gradient buffer
  std::vector<Slice> slices_;
  std::vector<char> slice_finite_;     // per slice, this step
  std::vector<double> slice_squares_;  // per slice, sum of g^2 (clipping)
  std::vector<double> raw_squares_;    // the same before clip_grad_value
  double grad_norm_ = -1;              // the last Update's, before clipping
  // Replica 0's sum of squares taken during backward, chunk by chunk while
  // the gradient is still in cache, where nothing changes the gradient
  // between backward and the update (one replica, an exchange that leaves
  // it alone); backward_squares_valid_: this step's is in.
  bool squares_in_backward_ = false;
  ChunkSquares backward_chunks_;
  double backward_squares_ = 0;
  bool backward_squares_valid_ = false;
  float clip_scale_ = 1;                // this step's clip_grad_norm scale
  RuleLayout whole_layout_;             // the buffer's tensor pieces
  std::vector<double> piece_sums_;      // LAMB/LARS: per piece, this step
  std::vector<double> tensor_totals_;   // ... and per tensor
  std::vector<ReplicaResult> results_;  // Results()' storage, one a replica
  StepTiming timing_;
};

absl::Status CpuEngine::Build() {
  const int R = options_.replicas;
  const Shape input = data_.train->sample_shape();
  if (!spec_.model().zoo().empty()) {
    ASSIGN_OR_RETURN(Shape want, ZooInputShape(spec_.model().zoo(), input));
    if (want != input) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo model ", spec_.model().zoo(), " takes samples of shape ",
          ShapeString(want), " but the data set gives ", ShapeString(input)));
    }
  }
  replicas_.resize(R);
  ASSIGN_OR_RETURN(replicas_[0].model,
                   BuildModel<float>(spec_.model(), input, spec_.seed()));
  RETURN_IF_ERROR(
      objective_.CheckModelOutput(replicas_[0].model->output_shape()));
  if (!replicas_[0].model->sparse_tables().empty() &&
      (dist_ == nullptr || !dist_->ps_mode)) {
    return absl::FailedPreconditionError(
        "the model's sparse tables (embedding_bag.sparse) live on "
        "parameter-server shards, which a single process does not have: run "
        "the job with `cohort local` (which starts the shards) or on a "
        "cluster");
  }
  for (int r = 1; r < R; ++r) {
    ASSIGN_OR_RETURN(replicas_[r].model,
                     BuildReplica<float>(spec_.model(), *replicas_[0].model));
  }
  for (int r = 0; r < R; ++r) {
    replicas_[r].model->SeedRandom(spec_.seed() + GlobalReplica(r));
  }
  if (options_.timeline != nullptr && options_.timeline_layers) {
    for (int r = 0; r < R; ++r) {
      layer_traces_.push_back(
          std::make_unique<LayerTimeline>(options_.timeline, r));
      replicas_[r].model->SetTrace(layer_traces_.back().get());
    }
  }
  for (Replica& rep : replicas_) grads_.push_back(rep.model->grads().data());
  results_.resize(R);
  // In PS mode the shards own the optimizer and its state.
  return BuildSlices(dist_ == nullptr || !dist_->ps_mode);
}

absl::Status CpuEngine::BuildSlices(bool optimizer) {
  const int R = options_.replicas;
  const int64_t n = replicas_[0].model->params().size();
  // 16-element boundaries keep every slice's vector loads aligned; LAMB and
  // LARS cut on kNormBlock multiples, where their per-piece norm sums end,
  // so that a step is bit-identical whatever the number of slices.
  const int64_t unit =
      NeedsTensorNorms(spec_.optimizer()) ? kNormBlock : int64_t{16};
  std::vector<ParamTensor> tensors;
  if (optimizer) {
    ASSIGN_OR_RETURN(tensors,
                     JobParamTensors(spec_, data_.train->sample_shape()));
    if (tensors.empty() || tensors.back().end != n) {
      return absl::InternalError(
          absl::StrCat("the model's flat buffer has ", n,
                       " parameters but its layer specs give ",
                       tensors.empty() ? 0 : tensors.back().end));
    }
    whole_layout_ = MakeRuleLayout(tensors, 0, n);
  }
  slices_.resize(R);
  for (int r = 0; r < R; ++r) {
    slices_[r].begin = std::min(n, (n * r / R) / unit * unit);
    slices_[r].end =
        r + 1 == R ? n : std::min(n, (n * (r + 1) / R) / unit * unit);
    if (optimizer) {
      slices_[r].optimizer = MakeOptimizer<float>(
          spec_.optimizer(), slices_[r].end - slices_[r].begin,
          MakeRuleLayout(tensors, slices_[r].begin, slices_[r].end));
    }
  }
  if (optimizer && slices_[0].optimizer->SumsPerPiece() > 0) {
    const int k = slices_[0].optimizer->SumsPerPiece();
    piece_sums_.assign(whole_layout_.num_pieces * k, 0.0);
    tensor_totals_.assign(int64_t{whole_layout_.num_tensors} * k, 0.0);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GradientExchange>> CpuEngine::CreateExchange() {
  const int64_t n = replicas_[0].model->grads().size();
  if (dist_ == nullptr) return std::make_unique<LocalExchange>();
  if (dist_->ps_mode) {
    // Sparse tables are read by row from the shards, through the exchange.
    std::vector<std::vector<SparseTable*>> tables;
    for (Replica& rep : replicas_) tables.push_back(rep.model->sparse_tables());
    auto ps = std::make_unique<PsExchange>(
        ReplicaGrads(), n, replicas_[0].model->params().data(),
        dist_->ps_connect, std::move(tables),
        SparseTableInfos(*replicas_[0].model));
    for (Replica& rep : replicas_) rep.model->SetRowFetcher(ps.get());
    return ps;
  }
  std::vector<int64_t> offsets;
  std::vector<FlatTensor> tensors;
  for (const auto& e : replicas_[0].model->param_store().entries()) {
    offsets.push_back(e.offset);
    const int64_t numel = NumElements(e.shape);
    tensors.push_back({e.offset, numel, e.shape.empty() ? 1 : e.shape[0]});
  }
  return std::make_unique<AllReduceExchange>(
      ReplicaGrads(), n, dist_->total_replicas, dist_->comm,
      dist_->bucket_bytes, std::move(offsets), options_.timeline,
      MakeBucketCodec(spec_.compression(), spec_.seed(), std::move(tensors), n,
                      options_.replicas));
}

// Padding stays zero: its gradient is always zero.
std::vector<int64_t> CpuEngine::ParamSizes() const {
  return PaddedParamSizes(*replicas_[0].model);
}

void CpuEngine::SeedStep(int64_t step) {
  for (int r = 0; r < options_.replicas; ++r) {
    replicas_[r].model->SeedRandom(spec_.seed() * 1000003 +
                                   GlobalReplica(r) * 7919 + step);
  }
}

absl::Status CpuEngine::ForwardBackward(const StepPlan& plan,
                                        BatchSource& source,
                                        GradientExchange& exchange) {
  GradientExchange* ranges = exchange.WantsRanges() ? &exchange : nullptr;
  squares_in_backward_ = options_.replicas == 1 && !exchange.ChangesGradients();
  backward_squares_valid_ = false;
  pool_.Run([&](int r) {
    replicas_[r].done = true;
    replicas_[r].error = absl::OkStatus();
    if (r < plan.active) ReplicaStep(r, plan.micro_batches, source, ranges);
  });
  for (int r = 0; r < plan.active; ++r) {
    if (!replicas_[r].error.ok()) return replicas_[r].error;
  }
  if (replicas_[0].done) {
    return absl::InternalError("a batch source ended before its last step");
  }
  return absl::OkStatus();
}

// Replica r's batches of the step, their results summed as one larger
// batch's.
void CpuEngine::ReplicaStep(int r, int batches, BatchSource& source,
                            GradientExchange* exchange) {
  Replica& rep = replicas_[r];
  batches = source.Batches(r, batches);
  ReplicaResult total;
  double weighted_loss = 0;
  StepTiming timing;
  rep.accumulated_samples = 0;
  for (int k = 0; k < batches; ++k) {
    const absl::Time t0 = absl::Now();
    if (!source.Next(r, &rep.batch)) {
      rep.done = true;
      return;
    }
    rep.done = false;
    if (!rep.batch.error.ok()) {
      rep.error = rep.batch.error;
      return;
    }
    const absl::Time t1 = absl::Now();
    Trace("data", r, t0, t1);
    BatchStep(r, k + 1 == batches, exchange);
    if (!rep.error.ok()) return;
    timing.data_s += absl::ToDoubleSeconds(t1 - t0);
    timing.compute_s += Seconds(t1);
    weighted_loss += rep.result.loss * rep.result.seen;
    total.correct += rep.result.correct;
    total.seen += rep.result.seen;
    total.skipped += rep.result.skipped;
  }
  total.loss = total.seen > 0 ? weighted_loss / total.seen : 0;
  rep.result = total;
  if (r == 0) timing_ = timing;
}

void CpuEngine::BatchStep(int r, bool last, GradientExchange* exchange) {
  Replica& rep = replicas_[r];
  const absl::Time forward_start = absl::Now();
  const Tensor& out = rep.model->Forward(rep.batch.features, Mode::kTrain);
  rep.error = rep.model->InputError();
  if (!rep.error.ok()) return;
  Loss(rep, out);
  const absl::Time backward_start = absl::Now();
  Trace("forward", r, forward_start, backward_start);
  if (!last) {
    rep.model->Backward(rep.grad_out);
    Accumulate(rep);
  } else {
    LastBackward(r, exchange);
  }
  Trace("backward", r, backward_start);
}

void CpuEngine::LastBackward(int r, GradientExchange* exchange) {
  Replica& rep = replicas_[r];
  const bool accumulated = rep.accumulated_samples > 0;
  const bool squares = r == 0 && squares_in_backward_;
  int64_t end = rep.model->grads().size();
  if (squares) backward_chunks_.Start(rep.model->grads().data(), end);
  if (!accumulated && !squares && exchange == nullptr) {
    rep.model->Backward(rep.grad_out);
  } else {
    rep.model->Backward(rep.grad_out, [&](int64_t offset) {
      if (accumulated) {
        FinishAccumulated(rep, offset, end);
        end = std::min(end, offset);
      }
      if (squares) backward_chunks_.Final(offset);
      if (exchange != nullptr) exchange->RangeReady(r, offset);
    });
  }
  if (accumulated) FinishAccumulated(rep, 0, end);
  if (squares) {
    backward_squares_ = backward_chunks_.Total();
    backward_squares_valid_ = true;
  }
}

// accumulated += samples x gradient: a batch's gradient is its samples'
// mean, so the sum weighs every sample of the step alike.
void CpuEngine::Accumulate(Replica& rep) {
  const Tensor& g = rep.model->grads();
  const float n = static_cast<float>(rep.result.seen);
  if (rep.accumulated.size() != static_cast<size_t>(g.size())) {
    rep.accumulated.assign(g.size(), 0.0f);
  }
  float* acc = rep.accumulated.data();
  const float* grad = g.data();
  if (rep.accumulated_samples == 0) {
    for (int64_t i = 0; i < g.size(); ++i) acc[i] = n * grad[i];
  } else {
    for (int64_t i = 0; i < g.size(); ++i) acc[i] += n * grad[i];
  }
  rep.accumulated_samples += rep.result.seen;
}

// The step's mean gradient over [begin, end): the earlier batches' sum and
// the last batch's, over every sample of the step.
void CpuEngine::FinishAccumulated(Replica& rep, int64_t begin, int64_t end) {
  const float n = static_cast<float>(rep.result.seen);
  const float inv =
      1.0f / static_cast<float>(rep.accumulated_samples + rep.result.seen);
  float* grad = rep.model->grads().data();
  const float* acc = rep.accumulated.data();
  for (int64_t i = begin; i < end; ++i) grad[i] = (acc[i] + n * grad[i]) * inv;
}

void CpuEngine::Loss(Replica& rep, const Tensor& out) {
  rep.result.correct = 0;
  rep.result.loss = objective_.Loss(out, rep.batch, &rep.grad_out, &rep.target,
                                    &rep.result.correct);
  rep.result.seen = rep.batch.size();
  rep.result.skipped = rep.batch.skipped;
}

void CpuEngine::ReduceAndCheck(int r, bool combine_local) {
  const Slice& s = slices_[r];
  const int R = options_.replicas;
  if (combine_local && R > 1) {
    SumReplicasInto(grads_, R, s.begin, s.end, 1.0f / R);
  }
  // In double a float gradient's squares cannot overflow, so the sum is
  // finite exactly when every element is: one pass checks and measures.
  // Taken during backward only with one replica, whose one slice is the
  // whole buffer (LastBackward).
  float* g = replicas_[0].model->grads().data();
  DCHECK(!backward_squares_valid_ ||
         (s.begin == 0 && s.end == replicas_[0].model->grads().size()));
  const double squares = backward_squares_valid_
                             ? backward_squares_
                             : SumOfSquares(g + s.begin, s.end - s.begin);
  slice_finite_[r] = std::isfinite(squares);
  slice_squares_[r] = squares;
  raw_squares_[r] = squares;
  const OptimizerSpec& o = spec_.optimizer();
  if (o.clip_grad_value() > 0 && slice_finite_[r]) {
    const float v = o.clip_grad_value();
    for (int64_t j = s.begin; j < s.end; ++j) {
      g[j] = std::min(v, std::max(-v, g[j]));
    }
    if (o.clip_grad_norm() > 0) {
      slice_squares_[r] = SumOfSquares(g + s.begin, s.end - s.begin);
    }
  }
}

void CpuEngine::OptimizerStep(int r, double lr, int pass) {
  const Slice& s = slices_[r];
  // An empty slice (a small model cut on kNormBlock multiples) still steps:
  // its step counter is the one a checkpoint keeps.
  const int64_t len = s.end - s.begin;
  float* g0 = replicas_[0].model->grads().data() + s.begin;
  if (clip_scale_ != 1 && pass == 0) {
    for (int64_t j = 0; j < len; ++j) g0[j] *= clip_scale_;
  }
  float* p = replicas_[0].model->params().data() + s.begin;
  if (s.optimizer->SumsPerPiece() == 0) {
    s.optimizer->Step(absl::MakeSpan(p, len), absl::MakeConstSpan(g0, len), lr);
  } else if (pass == 0) {
    s.optimizer->BeginStep(absl::MakeConstSpan(p, len),
                           absl::MakeConstSpan(g0, len), piece_sums_.data());
  } else {
    s.optimizer->FinishStep(absl::MakeSpan(p, len),
                            absl::MakeConstSpan(g0, len), lr,
                            tensor_totals_.data());
  }
}

absl::StatusOr<bool> CpuEngine::Update(const StepPlan& plan,
                                       bool combine_local) {
  slice_finite_.assign(options_.replicas, 1);
  slice_squares_.assign(options_.replicas, 0.0);
  raw_squares_.assign(options_.replicas, 0.0);
  pool_.Run([&](int r) { ReduceAndCheck(r, combine_local); });
  const bool finite = std::all_of(slice_finite_.begin(), slice_finite_.end(),
                                  [](char f) { return f != 0; });
  double raw = 0;
  for (double q : raw_squares_) raw += q;
  grad_norm_ = std::sqrt(raw);
  clip_scale_ = 1;
  if (finite && spec_.optimizer().clip_grad_norm() > 0) {
    clip_scale_ = ClipScale(slice_squares_, spec_.optimizer().clip_grad_norm());
  }
  if (!finite) return false;
  pool_.Run([&](int r) { OptimizerStep(r, plan.lr, 0); });
  const int k = slices_[0].optimizer != nullptr
                    ? slices_[0].optimizer->SumsPerPiece()
                    : 0;
  if (k > 0) {
    // Every slice's piece sums are in: each tensor's norms, then the update.
    FoldPieceSums(whole_layout_, k, piece_sums_.data(), tensor_totals_.data());
    pool_.Run([&](int r) { OptimizerStep(r, plan.lr, 1); });
  }
  return true;
}

absl::Span<const ReplicaResult> CpuEngine::Results(const StepPlan& plan) {
  for (int r = 0; r < plan.active; ++r) results_[r] = replicas_[r].result;
  return absl::MakeConstSpan(results_.data(), plan.active);
}

// Averages BatchNorm statistics over workers, so that every worker
// evaluates (and would checkpoint) the same model.
absl::Status CpuEngine::AverageBuffersAcrossWorkers() {
  for (Tensor* b : replicas_[0].model->Buffers()) {
    RETURN_IF_ERROR(dist_->comm->AllReduceSum(b->data(), b->size()));
    const float scale = 1.0f / dist_->world_size;
    for (int64_t i = 0; i < b->size(); ++i) (*b)[i] *= scale;
  }
  return absl::OkStatus();
}

absl::Status CpuEngine::EvaluateShare(int r, const Dataset& test, int64_t share,
                                      int64_t shares, EvalSums* sums) {
  const int64_t n = test.size();
  std::vector<int64_t> idx;
  for (int64_t i = n * share / shares; i < n * (share + 1) / shares; ++i) {
    idx.push_back(i);
  }
  ReadOptions read;
  read.skip_bad_samples = spec_.data().skip_bad_samples();
  Loader loader(&test, std::move(idx), spec_.eval().batch_size(), false,
                BatchLayout::kBatchInner, 1, 2, read);
  Batch b;
  Tensor scratch;
  while (loader.Next(&b)) {
    RETURN_IF_ERROR(b.error);
    const Tensor& out = replicas_[r].model->Forward(b.features, Mode::kEval);
    RETURN_IF_ERROR(replicas_[r].model->InputError());
    objective_.Accumulate(out, b, &scratch, sums);
  }
  return absl::OkStatus();
}

// Every replica evaluates its share of the test set; the sums are then
// added up across workers, and the scores AUC needs gathered from them all.
absl::StatusOr<EvalSums> CpuEngine::Evaluate(const Dataset& test,
                                             bool across_workers) {
  const int R = options_.replicas;
  if (across_workers) RETURN_IF_ERROR(AverageBuffersAcrossWorkers());
  // Replicas saw different data, so their BatchNorm statistics differ;
  // replica 0's are the model's (as with DDP's broadcast from rank 0).
  std::vector<Tensor*> master = replicas_[0].model->Buffers();
  for (int r = 1; r < R; ++r) {
    std::vector<Tensor*> b = replicas_[r].model->Buffers();
    for (size_t i = 0; i < b.size(); ++i) b[i]->CopyFrom(*master[i]);
  }
  const int64_t shares = across_workers ? dist_->total_replicas : R;
  std::vector<EvalSums> sums(R);
  std::vector<absl::Status> status(R);
  pool_.Run([&](int r) {
    status[r] = EvaluateShare(r, test, across_workers ? GlobalReplica(r) : r,
                              shares, &sums[r]);
  });
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  // In replica order, as the gather is in worker order: the scores are
  // then laid out alike however the job is split (AUC sorts them anyway).
  for (int r = 1; r < R; ++r) sums[0].Add(sums[r]);
  EvalSums total = std::move(sums[0]);
  if (!across_workers) return total;
  float flat[EvalSums::kCount];
  for (int i = 0; i < EvalSums::kCount; ++i) flat[i] = total.v[i];
  RETURN_IF_ERROR(dist_->comm->AllReduceSum(flat, EvalSums::kCount));
  for (int i = 0; i < EvalSums::kCount; ++i) total.v[i] = flat[i];
  if (objective_.keeps_scores()) {
    std::vector<float>* scores[] = {&total.positive_scores,
                                    &total.negative_scores};
    RETURN_IF_ERROR(GatherBySum(dist_->comm->rank(), dist_->comm->size(),
                                scores, [this](float* data, int64_t n) {
                                  return dist_->comm->AllReduceSum(data, n);
                                }));
  }
  return total;
}

// The flat parameters, every optimizer state tensor as one flat tensor
// (slices concatenated, so a checkpoint does not depend on the number of
// replicas; Adam's step counter once), and the BatchNorm statistics.
std::vector<std::pair<std::string, int64_t>> CpuEngine::StateLayout() const {
  std::vector<std::pair<std::string, int64_t>> layout;
  const int64_t n = replicas_[0].model->params().size();
  layout.emplace_back("params", n);
  const Slice& s0 = slices_[0];
  const std::vector<Tensor*> states =
      s0.optimizer != nullptr ? s0.optimizer->State() : std::vector<Tensor*>{};
  for (size_t k = 0; k < states.size(); ++k) {
    const bool per_element = states[k]->size() == s0.end - s0.begin;
    layout.emplace_back(absl::StrCat("optimizer.", k),
                        per_element ? n : states[k]->size());
  }
  AppendBufferLayout(*replicas_[0].model, &layout);
  return layout;
}

absl::StatusOr<std::vector<CheckpointTensor>> CpuEngine::CaptureState() {
  std::vector<CheckpointTensor> out = {ParamsTensor(*replicas_[0].model)};
  const size_t states = slices_[0].optimizer != nullptr
                            ? slices_[0].optimizer->State().size()
                            : 0;
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
    out.push_back(std::move(t));
  }
  AppendBufferTensors(*replicas_[0].model, &out);
  return out;
}

absl::Status CpuEngine::RestoreState(const std::vector<float>& flat) {
  const Tensor& p = replicas_[0].model->params();
  const float* from = RestoreParams(flat.data(), *replicas_[0].model);
  const size_t states = slices_[0].optimizer != nullptr
                            ? slices_[0].optimizer->State().size()
                            : 0;
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
  RestoreBuffers(from, *replicas_[0].model);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CpuEngine::Parameters() {
  const Tensor& p = replicas_[0].model->params();
  return std::vector<float>(p.data(), p.data() + p.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceEngine>> CreateCpuEngine(
    const JobSpec& spec, const TrainOptions& options, const DataSplits& data) {
  SetComputeThreads(std::max(1, options.threads / options.replicas));
  auto engine = std::make_unique<CpuEngine>(spec, options, data);
  RETURN_IF_ERROR(engine->Build());
  return engine;
}

}  // namespace cohort
