// Training progress for people: a live single line on a terminal (step,
// samples/s, loss, ETA, redrawn at most 10 times a second), or plain log
// lines every few seconds when output goes to a file or a pipe.
//
// Thread safety: none; the training thread owns it.
#ifndef COHORT_WORKER_PROGRESS_H_
#define COHORT_WORKER_PROGRESS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace cohort {

class Progress {
 public:
  Progress(bool live, bool quiet, double log_every_seconds, int64_t batch);

  // After every step. `epoch` counts from 0; `step_in_epoch` from 1.
  void Step(int64_t epoch, int64_t step_in_epoch, int64_t steps_per_epoch,
            int64_t step, int64_t total_steps, int64_t samples, double loss);
  // After an epoch and its evaluation's metrics (none: not evaluated).
  void EpochDone(int64_t epoch, double train_loss,
                 const std::vector<std::pair<std::string, double>>& metrics,
                 double seconds);
  // After an evaluation in mid-epoch (eval.every_steps) at run step `step`.
  void Evaluated(int64_t step,
                 const std::vector<std::pair<std::string, double>>& metrics);

 private:
  const bool live_;
  const bool quiet_;
  const absl::Duration every_;
  const absl::Time start_;
  absl::Time last_print_;
  int64_t last_samples_ = 0;
  absl::Time last_rate_time_;
  double rate_ = 0;
  double loss_avg_ = -1;
};

// " | test accuracy 98.10% | top-5 99.90%" or " | test mse 0.01 | test mae
// 0.08 | test R² 0.9712": the metrics of an evaluation for a console line.
std::string FormatTestMetrics(
    const std::vector<std::pair<std::string, double>>& metrics);

}  // namespace cohort

#endif  // COHORT_WORKER_PROGRESS_H_
