// The job's objective on a batch: the training loss with its gradient, and
// the evaluation metrics the task calls for (top-1 and top-5 accuracy for
// classes; MSE, MAE and R² for regression; per-element accuracy for
// multi-label BCE, and AUC and normalized entropy for BCE on one target (a
// click-through-rate model); per-token accuracy and perplexity for token
// sequences).
//
// Shared by the engines, so that every device computes the same numbers.
// Ownership: a value type holding the loss settings and the target layout.
// Thread safety: const methods are thread-safe for distinct scratch and
// output arguments (each replica passes its own).
#ifndef COHORT_WORKER_OBJECTIVE_H_
#define COHORT_WORKER_OBJECTIVE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/tensor.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/loss.h"

namespace cohort {

// Sums over an evaluation, added up over replicas and workers (in float,
// through the all-reduce; exact for counts below 2^24), and the scores AUC
// needs whole, which are gathered instead (worker/metrics/gather_by_sum.h).
struct EvalSums {
  enum Index {
    kSamples,
    kLoss,  // summed over samples
    kTop1,  // class data: samples whose first-ranked class is right;
            // BCE on float targets: elements on the right side of 0.5
    kTop5,
    kElements,  // float targets: target elements compared
    kAbsError,
    kSqError,
    // Target elements less a reference value (the first test target's
    // mean), and their squares: the targets' variance for R² without the
    // cancellation of raw sums of squares.
    kShifted,
    kShiftedSq,
    // BCE on one target: the targets' sum (the positives, for 0/1 labels),
    // for normalized entropy's base rate.
    kPositives,
    kCount
  };
  double v[kCount] = {};
  // BCE on one target (Objective::keeps_scores()): each evaluated sample's
  // logit, by its label (positive from 0.5 up), for the exact AUC.
  std::vector<float> positive_scores;
  std::vector<float> negative_scores;

  // Adds the sums and appends the scores.
  void Add(const EvalSums& o) {
    for (int i = 0; i < kCount; ++i) v[i] += o.v[i];
    positive_scores.insert(positive_scores.end(), o.positive_scores.begin(),
                           o.positive_scores.end());
    negative_scores.insert(negative_scores.end(), o.negative_scores.begin(),
                           o.negative_scores.end());
  }
};

// A named result of an evaluation ("accuracy", "top5_accuracy", "loss",
// "mse", "mae", "r2", "perplexity", "auc", "normalized_entropy").
using Metrics = std::vector<std::pair<std::string, double>>;

class Objective {
 public:
  // For `spec` (loss kind, label smoothing, Huber delta, FillJobDefaults
  // applied) training on data shaped like `test`; reads test sample 0's
  // target for the R² reference.
  Objective(const JobSpec& spec, const Dataset& test);

  // Whether the model's output per sample fits the targets: at least
  // `classes` logits for class labels, as many elements as the target for
  // float targets. InvalidArgument saying what to change otherwise.
  absl::Status CheckModelOutput(const Shape& output) const;

  // The batch's mean loss of `out` (the model's output {N, ...}); writes
  // dLoss/dOut to `grad` when not null and adds correct top-1 predictions
  // of class data to *correct when not null. `scratch` holds one-hot
  // targets of class data under an elementwise loss.
  double Loss(const Tensor& out, const Batch& batch, Tensor* grad,
              Tensor* scratch, int64_t* correct) const;

  // Adds the evaluation of `out` on `batch` to `sums`.
  void Accumulate(const Tensor& out, const Batch& batch, Tensor* scratch,
                  EvalSums* sums) const;

  // The metrics of a finished evaluation, in a fixed order (loss first).
  // A metric the test set leaves undefined is left out: R² of targets that
  // do not vary, AUC and normalized entropy of labels of one class.
  Metrics Finish(const EvalSums& sums) const;

  bool float_targets() const { return float_targets_; }
  // Whether Accumulate records every sample's score (BCE_WITH_LOGITS on a
  // target of one element): an engine that splits an evaluation must then
  // gather the scores of all its parts before Finish.
  bool keeps_scores() const { return binary_; }

 private:
  // CheckModelOutput's shape rules, before the class weights' count.
  absl::Status CheckOutputShape(const Shape& output) const;

  // The targets `out` is compared with: the batch's float targets, or the
  // one-hot vectors of its labels in `scratch`.
  const Tensor& Targets(const Tensor& out, const Batch& batch,
                        Tensor* scratch) const;

  // The cross-entropy's class weights and ignored class (loss.h).
  ClassWeighting Weighting() const { return {loss_weights_, ignore_index_}; }
  // Accumulate's and Finish's part for float targets.
  void AccumulateFloats(const Tensor& out, const Tensor& targets,
                        EvalSums* sums) const;
  void FinishFloats(const EvalSums& sums, Metrics* m) const;
  // keeps_scores(): the base rate and the scores.
  void AccumulateBinary(const Tensor& out, const Tensor& targets,
                        EvalSums* sums) const;
  void FinishBinary(const EvalSums& sums, Metrics* m) const;

  LossKind kind_;
  float label_smoothing_;
  std::vector<float> loss_weights_;
  int32_t ignore_index_ = -1;
  float huber_delta_;
  bool float_targets_;
  bool token_targets_;       // a class per target element (Dataset)
  Shape target_shape_;       // empty for class labels
  int64_t target_elements_;  // per sample, float targets only
  int classes_;
  double reference_ = 0;
  bool binary_;  // keeps_scores()
};

// `metrics`' value named `name`, or `fallback`.
double MetricOr(const Metrics& metrics, const std::string& name,
                double fallback);

}  // namespace cohort

#endif  // COHORT_WORKER_OBJECTIVE_H_
