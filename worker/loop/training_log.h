// The logs a training run leaves for people to read afterwards (log.dir in
// the job spec, or --log-dir), written by the chief alone (rank 0, or the
// process of `cohort train`):
//
//   train.csv  a row every log.every_steps steps: step, epoch, wall_time,
//              loss (mean over the row's steps), lr, grad_norm (before
//              clipping; empty when the worker does not know it, as in PS
//              mode), samples_per_s (the job's, over the row's steps)
//   eval.csv   a row per evaluation: step, epoch, wall_time and each metric
//              of the evaluation (loss, accuracy, ...)
//   events.out.tfevents.<time>.<host>  a TensorBoard event file per run
//              with the same figures as train/<column> and eval/<metric>
//              scalars
//
// Steps and epochs count from 1, as the JSON report and the console count
// them.
// Rows reach the files at each evaluation, every kFlushRows rows or
// kFlushSeconds, and at the end, so a run that dies keeps what came before.
// A run that continues after step S (a resumed checkpoint) keeps the CSV
// rows up to S and drops those past it (worker/loop/scalar_log.h); its new
// event file starts with a SessionLog START at S + 1, which makes
// TensorBoard drop the earlier files' events past S.
//
// Failing to open the logs fails the run before it trains; failing to write
// them later is reported once on stderr and logging stops: losing rows is
// not worth losing the training.
//
// Ownership: owns its files. Thread safety: none; the training thread uses
// it.
#ifndef COHORT_WORKER_LOOP_TRAINING_LOG_H_
#define COHORT_WORKER_LOOP_TRAINING_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/loop/scalar_log.h"
#include "worker/loop/tfevents.h"

namespace cohort {

struct TrainingLogOptions {
  std::string dir;
  int64_t every_steps = 1;  // train.csv rows; <= 0 reads as 1
  int64_t start_step = 0;   // the run continues after this step
};

// What one optimizer step tells the log.
struct StepScalars {
  int64_t step = 0;       // steps done, this one included
  int64_t epoch = 0;      // from 0, as the loop counts (written from 1)
  double loss = 0;        // mean over the chief's replicas
  double lr = 0;          // the step's learning rate
  double grad_norm = -1;  // -1: not known
  int64_t samples = 0;    // the job's samples in the step
  double seconds = 0;     // the step's time
};

class TrainingLog {
 public:
  static constexpr int64_t kFlushRows = 100;
  static constexpr double kFlushSeconds = 5;

  // Makes `options.dir` if needed and opens the three files in it.
  // INVALID_ARGUMENT naming the directory when it cannot be written.
  static absl::StatusOr<std::unique_ptr<TrainingLog>> Open(
      const TrainingLogOptions& options);
  ~TrainingLog() { Close(); }

  // After every step.
  void Step(const StepScalars& s);
  // After every evaluation, at step `step` of epoch `epoch` (from 0).
  void Evaluated(int64_t step, int64_t epoch,
                 const std::vector<std::pair<std::string, double>>& metrics);
  // Writes the row of steps that have not filled a row yet, and flushes.
  // Idempotent.
  void Close();

 private:
  TrainingLog(const TrainingLogOptions& options, std::unique_ptr<ScalarLog> t,
              std::unique_ptr<ScalarLog> e,
              std::unique_ptr<EventFileWriter> events);

  absl::Status WriteStepRow();
  absl::Status Flush();
  // Stops logging after `s`, saying so once.
  void Fail(const absl::Status& s);

  const std::string dir_;
  const int64_t every_steps_;
  std::unique_ptr<ScalarLog> train_;
  std::unique_ptr<ScalarLog> eval_;
  std::unique_ptr<EventFileWriter> events_;
  bool failed_ = false;
  // The steps since the last train.csv row.
  StepScalars last_;
  int64_t window_steps_ = 0;
  double window_loss_ = 0;
  int64_t window_samples_ = 0;
  double window_seconds_ = 0;
  int64_t unflushed_rows_ = 0;
  absl::Time last_flush_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_LOOP_TRAINING_LOG_H_
