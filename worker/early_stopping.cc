#include "worker/early_stopping.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cohort {

int ControlMetricIndex(absl::string_view metric) {
  for (size_t i = 0; i < kControlMetrics.size(); ++i) {
    if (kControlMetrics[i] == metric) return static_cast<int>(i);
  }
  return -1;
}

bool HigherIsBetter(absl::string_view metric) {
  return metric == "accuracy" || metric == "top5_accuracy" || metric == "r2" ||
         metric == "auc";
}

bool MayBeUndefined(absl::string_view metric) {
  return metric == "r2" || metric == "auc" || metric == "normalized_entropy";
}

std::string ControlMetric(const EvalSpec& eval, bool float_targets) {
  if (!eval.metric().empty()) return eval.metric();
  return float_targets ? "loss" : "accuracy";
}

std::string EarlyStoppingState::Encode() const {
  char best_text[40];
  std::snprintf(best_text, sizeof(best_text), "%.17g", best);
  return absl::StrCat("metric=", metric >= 0 ? kControlMetrics[metric] : "-",
                      " has_best=", has_best ? 1 : 0, " best=", best_text,
                      " best_step=", best_step, " since=", since_best,
                      " last_eval=", last_eval_step,
                      " stopped=", stopped ? 1 : 0);
}

absl::StatusOr<EarlyStoppingState> EarlyStoppingState::Decode(
    absl::string_view text) {
  EarlyStoppingState s;
  for (absl::string_view part : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const std::vector<absl::string_view> kv = absl::StrSplit(part, '=');
    bool ok = kv.size() == 2;
    int64_t n = 0;
    if (ok && kv[0] == "metric") {
      s.metric = ControlMetricIndex(kv[1]);
      ok = s.metric >= 0 || kv[1] == "-";
    } else if (ok && kv[0] == "best") {
      ok = absl::SimpleAtod(kv[1], &s.best);
    } else if (ok && absl::SimpleAtoi(kv[1], &n)) {
      if (kv[0] == "has_best") {
        s.has_best = n != 0;
      } else if (kv[0] == "best_step") {
        s.best_step = n;
      } else if (kv[0] == "since") {
        s.since_best = n;
      } else if (kv[0] == "last_eval") {
        s.last_eval_step = n;
      } else if (kv[0] == "stopped") {
        s.stopped = n != 0;
      }  // other keys: written by a newer cohort, ignored
    } else {
      ok = false;
    }
    if (!ok) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint metadata early_stopping has a bad part \"", part, "\""));
    }
  }
  return s;
}

bool EarlyStoppingState::operator==(const EarlyStoppingState& o) const {
  return metric == o.metric && has_best == o.has_best &&
         (best == o.best || (std::isnan(best) && std::isnan(o.best))) &&
         best_step == o.best_step && since_best == o.since_best &&
         last_eval_step == o.last_eval_step && stopped == o.stopped;
}

EarlyStopping::EarlyStopping(absl::string_view metric, int patience,
                             float min_delta)
    : metric_(metric), higher_(HigherIsBetter(metric)), patience_(patience) {
  // 0.001 as written, not the float 0.0010000000475 (which can decide a
  // comparison of metrics that are themselves ratios of counts).
  min_delta_ = min_delta;
  double written = 0;
  if (absl::SimpleAtod(absl::StrCat(min_delta), &written)) {
    min_delta_ = written;
  }
  state_.metric = ControlMetricIndex(metric);
}

bool EarlyStopping::Observe(int64_t step, double value) {
  state_.last_eval_step = step;
  bool better = false;
  if (!std::isnan(value)) {
    better = !state_.has_best || (higher_ ? value > state_.best + min_delta_
                                          : value < state_.best - min_delta_);
  }
  if (better) {
    state_.has_best = true;
    state_.best = value;
    state_.best_step = step;
    state_.since_best = 0;
  } else {
    ++state_.since_best;
  }
  if (patience_ > 0 && state_.since_best >= patience_) state_.stopped = true;
  return better;
}

bool EarlyStopping::Restore(const EarlyStoppingState& s) {
  if (s.metric != ControlMetricIndex(metric_)) {
    // Still the step of the last evaluation: it is not run again.
    const int64_t last = s.last_eval_step;
    state_ = EarlyStoppingState();
    state_.metric = ControlMetricIndex(metric_);
    state_.last_eval_step = last;
    return s.metric < 0;
  }
  state_ = s;
  // A larger patience than the run that stopped had lets training go on.
  state_.stopped = patience_ > 0 && state_.since_best >= patience_;
  return true;
}

}  // namespace cohort
