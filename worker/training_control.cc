// The training loop's evaluations and what they decide: evaluation every
// eval.every_steps and at each epoch's end, the best evaluation by
// eval.metric, early stopping (eval.early_stopping_patience) and the best
// checkpoint (checkpoint.keep_best). See training_loop.h and
// early_stopping.h.
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/checkpoint.h"
#include "common/files.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/timeline.h"
#include "worker/training_loop.h"

namespace cohort {
namespace {

constexpr char kControlKey[] = "early_stopping";

double SecondsSince(absl::Time t) {
  return absl::ToDoubleSeconds(absl::Now() - t);
}

}  // namespace

bool TrainingLoop::EvaluationDue(bool epoch_done) const {
  if (!control_ || control_->state().last_eval_step == step_ || step_ == 0) {
    return false;
  }
  const int64_t every = spec_.eval().every_steps();
  return (every > 0 && step_ % every == 0) || epoch_done || StepLimitReached();
}

absl::Status TrainingLoop::EvaluateIfDue(bool epoch_done, Progress& progress) {
  if (!EvaluationDue(epoch_done)) return absl::OkStatus();
  RETURN_IF_ERROR(Evaluate(epoch_done));
  // An epoch's end has its own line (Progress::EpochDone).
  if (!epoch_done) progress.Evaluated(step_, last_metrics_);
  return absl::OkStatus();
}

absl::Status TrainingLoop::CatchUpEvaluation(Progress& progress) {
  if (SharedData() || steps_this_run_ > 0) return absl::OkStatus();
  // Restored at an epoch's start: the step ended the epoch before.
  const bool epoch_done = start_epoch_steps_ == 0 && start_position_ == 0;
  if (!EvaluationDue(epoch_done)) return absl::OkStatus();
  RETURN_IF_ERROR(Evaluate(epoch_done));
  progress.Evaluated(step_, last_metrics_);
  return absl::OkStatus();
}

absl::Status TrainingLoop::Evaluate(bool epoch_done) {
  const absl::Time t = absl::Now();
  ASSIGN_OR_RETURN(const EvalSums sums,
                   engine_->Evaluate(*data_.test, EvaluateAcrossWorkers()));
  last_metrics_ = objective_->Finish(sums);
  if (log_ != nullptr) log_->Evaluated(step_, logged_.epoch, last_metrics_);
  Trace("evaluate", Timeline::kStepLane, t, absl::Now(),
        absl::StrCat("\"step\": ", step_));
  result_.eval_seconds += SecondsSince(t);
  result_.test_loss = MetricOr(last_metrics_, "loss", -1);
  // Accuracy of classes; multi-label BCE's per-element accuracy is only a
  // metric, not the job's accuracy.
  result_.test_accuracy = objective_->float_targets()
                              ? -1
                              : MetricOr(last_metrics_, "accuracy", -1);
  result_.test_metrics = last_metrics_;
  return Control(epoch_done);
}

absl::Status TrainingLoop::Control(bool epoch_done) {
  if (!control_) return absl::OkStatus();
  const std::string& metric = control_->metric();
  double value = std::nan("");
  bool found = false;
  for (const auto& [name, v] : last_metrics_) {
    if (name == metric) {
      value = v;
      found = true;
    }
  }
  // R² is left out when the test targets do not vary, AUC and normalized
  // entropy when the labels are of one class: no improvement.
  if (!found && !MayBeUndefined(metric)) {
    std::string given;
    for (const auto& m : last_metrics_) {
      absl::StrAppend(&given, given.empty() ? "" : ", ", m.first);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("eval.metric ", metric,
                     ": this job's evaluation does not give it (it "
                     "gives ",
                     given,
                     "; top5_accuracy needs more than 5 classes; auc and "
                     "normalized_entropy need loss BCE_WITH_LOGITS on one "
                     "target)"));
  }
  const bool better = control_->Observe(step_, value);
  if (better && spec_.checkpoint().keep_best() && Checkpoints()) {
    RETURN_IF_ERROR(WriteBest(epoch_done));
  }
  if (control_->ShouldStop()) {
    // Logged even by quiet workers: it is why the job ends before its
    // epochs are done.
    const EarlyStoppingState& s = control_->state();
    LOG(INFO) << absl::StrFormat(
        "early stopping at step %d: %s has not improved on %.6g (step %d) "
        "for %d evaluations",
        step_, metric, s.best, s.best_step, s.since_best);
  }
  return absl::OkStatus();
}

absl::Status TrainingLoop::WriteBest(bool epoch_done) {
  const absl::Time start = absl::Now();
  // Where the next step would start, as the step's own checkpoint has it.
  const bool next_epoch = epoch_done && cur_epoch_steps_ > 0;
  ASSIGN_OR_RETURN(Checkpoint c, next_epoch ? Capture(cur_epoch_ + 1, 0, 0)
                                            : Capture(cur_epoch_, cur_position_,
                                                      cur_epoch_steps_));
  const EarlyStoppingState& s = control_->state();
  c.metadata["best_metric"] = control_->metric();
  c.metadata["best_value"] = absl::StrFormat("%.17g", s.best);
  const std::string dir = absl::StrCat(checkpoint_dir_, "/best");
  CheckpointWriteOptions o;
  o.keep = 1;
  o.only_this = true;
  if (absl::Status w = WriteCheckpoint(dir, c, o); !w.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the best checkpoint (step ", step_, ") cannot be written (",
        w.message(), "); the job fails rather than lose it"));
  }
  const std::string json = absl::StrCat(
      "{\"metric\": ", JsonString(control_->metric()),
      ", \"value\": ", absl::StrFormat("%.17g", s.best),
      ", \"step\": ", s.best_step,
      ", \"checkpoint\": ", JsonString(CheckpointFileName(c.step)), "}\n");
  if (absl::Status w = WriteFileAtomically(dir + "/best.json", json); !w.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "best.json of step ", step_, " cannot be written (", w.message(), ")"));
  }
  Trace("best checkpoint", Timeline::kStepLane, start, absl::Now(),
        absl::StrCat("\"step\": ", step_));
  return absl::OkStatus();
}

void TrainingLoop::CaptureControl(Checkpoint& c) const {
  if (control_) c.metadata[kControlKey] = control_->state().Encode();
}

absl::Status TrainingLoop::RestoreControl(const Checkpoint& c) {
  auto it = c.metadata.find(kControlKey);
  if (!control_ || it == c.metadata.end()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const EarlyStoppingState s,
                   EarlyStoppingState::Decode(it->second));
  if (!control_->Restore(s) && !options_.quiet) {
    std::fprintf(stderr,
                 "cohort: the restored best evaluation was by another metric; "
                 "eval.metric %s starts afresh\n",
                 control_->metric().c_str());
  }
  return absl::OkStatus();
}

void TrainingLoop::FillControlResult() {
  if (!control_) return;
  const EarlyStoppingState& s = control_->state();
  result_.stopped_early = s.stopped;
  result_.best_metric_name = control_->metric();
  if (s.has_best) {
    result_.best_metric = s.best;
    result_.best_step = s.best_step;
  }
}

}  // namespace cohort
