// Training progress for people: a live single line on a terminal (step,
// samples/s, loss, ETA, redrawn at most 10 times a second), or plain log
// lines every few seconds when output goes to a file or a pipe.
//
// Thread safety: none; the training thread owns it.
#ifndef COHORT_WORKER_PROGRESS_H_
#define COHORT_WORKER_PROGRESS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace cohort {

class Progress {
 public:
  Progress(bool live, bool quiet, double log_every_seconds, int64_t batch);

  // After every step. `epoch` counts from 0; `step_in_epoch` from 1.
  void Step(int64_t epoch, int64_t step_in_epoch, int64_t steps_per_epoch,
            int64_t step, int64_t total_steps, int64_t samples, double loss);
  // After an epoch (and its evaluation; test_accuracy < 0 when none).
  void EpochDone(int64_t epoch, double train_loss, double test_accuracy,
                 double seconds);

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

}  // namespace cohort

#endif  // COHORT_WORKER_PROGRESS_H_
