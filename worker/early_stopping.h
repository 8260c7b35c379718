// Validation-driven control (eval.metric, eval.early_stopping_patience,
// eval.min_delta, checkpoint.keep_best): which evaluation is the best so
// far, and when training stops because the metric has stopped improving.
//
// The state is part of the training state: it travels in every checkpoint
// (metadata "early_stopping") and in the elastic agreement, so that a run
// killed and resumed, or regrouped, decides at exactly the same step as an
// undisturbed one. Every worker observes the same job-wide metric (the
// evaluation's sums are all-reduced), so every worker decides alike.
//
// Ownership: a value type. Thread safety: none; the training thread owns it.
#ifndef COHORT_WORKER_EARLY_STOPPING_H_
#define COHORT_WORKER_EARLY_STOPPING_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace cohort {

// The metrics an evaluation can drive control with, in a fixed order (the
// index travels in the elastic agreement: new names go at the end).
inline constexpr std::array<absl::string_view, 9> kControlMetrics = {
    "loss", "accuracy", "top5_accuracy", "mse", "mae", "r2", "perplexity",
    // BCE_WITH_LOGITS on one target
    "auc", "normalized_entropy"};

// Index of `metric` in kControlMetrics, or -1.
int ControlMetricIndex(absl::string_view metric);
// Whether a larger value of `metric` is better (accuracy, top5_accuracy,
// r2, auc); loss, mse, mae, perplexity and normalized_entropy are better
// smaller.
bool HigherIsBetter(absl::string_view metric);
// Whether an evaluation leaves `metric` out where the test set leaves it
// undefined (r2 of targets that do not vary; auc and normalized_entropy of
// labels of one class), rather than never giving it: such an evaluation
// counts as no improvement.
bool MayBeUndefined(absl::string_view metric);
// eval.metric, or its default: accuracy for class labels, loss otherwise.
std::string ControlMetric(const EvalSpec& eval, bool float_targets);

// What a checkpoint records of control.
struct EarlyStoppingState {
  int metric = -1;  // index into kControlMetrics; -1: nothing observed yet
  bool has_best = false;
  double best = 0;
  int64_t best_step = -1;
  int64_t since_best = 0;       // evaluations since the best
  int64_t last_eval_step = -1;  // the step of the last evaluation observed
  bool stopped = false;         // patience ran out

  // "metric=accuracy best=0.912... best_step=120 since=2 last_eval=160
  // stopped=0" (doubles with 17 digits: exact on the way back).
  std::string Encode() const;
  // DATA_LOSS naming the part that does not parse.
  static absl::StatusOr<EarlyStoppingState> Decode(absl::string_view text);
  bool operator==(const EarlyStoppingState& o) const;
};

class EarlyStopping {
 public:
  // `patience` 0: never stops. `min_delta`: an improvement must beat the
  // best by more than this (read as the spec wrote it).
  EarlyStopping(absl::string_view metric, int patience, float min_delta);

  // An evaluation at `step` gave `value`; returns whether it is the new
  // best. A NaN is never an improvement.
  bool Observe(int64_t step, double value);
  bool ShouldStop() const { return state_.stopped; }

  const EarlyStoppingState& state() const { return state_; }
  // Takes over a restored state; one recorded for another metric is
  // dropped (returns false), since its best means nothing for this one.
  bool Restore(const EarlyStoppingState& s);
  const std::string& metric() const { return metric_; }
  int patience() const { return patience_; }

 private:
  std::string metric_;
  bool higher_;
  int patience_;
  double min_delta_;
  EarlyStoppingState state_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_EARLY_STOPPING_H_
