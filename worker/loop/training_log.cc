#include "worker/loop/training_log.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

std::string WallTimeCell(double wall_time) {
  return absl::StrFormat("%.3f", wall_time);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingLog>> TrainingLog::Open(
    const TrainingLogOptions& options) {
  const std::string& dir = options.dir;
  if (absl::Status s = CheckCanWriteDir(dir); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("log directory: ", s.message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarLog> train,
                   ScalarLog::Open(dir + "/train.csv", options.start_step));
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarLog> eval,
                   ScalarLog::Open(dir + "/eval.csv", options.start_step));
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<EventFileWriter> events,
                   EventFileWriter::Create(dir, now));
  events->Add(SessionStartEvent(EventWallTime(now), options.start_step + 1));
  std::unique_ptr<TrainingLog> log(new TrainingLog(
      options, std::move(train), std::move(eval), std::move(events)));
  // The event file exists from the start, so a run that fails early still
  // shows where its logs went.
  RETURN_IF_ERROR(log->Flush());
  return log;
}

TrainingLog::TrainingLog(const TrainingLogOptions& options,
                         std::unique_ptr<ScalarLog> t,
                         std::unique_ptr<ScalarLog> e,
                         std::unique_ptr<EventFileWriter> events)
    : dir_(options.dir),
      every_steps_(std::max<int64_t>(1, options.every_steps)),
      train_(std::move(t)),
      eval_(std::move(e)),
      events_(std::move(events)),
      last_flush_(absl::Now()) {}

void TrainingLog::Step(const StepScalars& s) {
  if (failed_) return;
  last_ = s;
  ++window_steps_;
  window_loss_ += s.loss;
  window_samples_ += s.samples;
  window_seconds_ += s.seconds;
  if (s.step % every_steps_ != 0) return;
  absl::Status status = WriteStepRow();
  if (status.ok() &&
      (unflushed_rows_ >= kFlushRows ||
       absl::Now() - last_flush_ >= absl::Seconds(kFlushSeconds))) {
    status = Flush();
  }
  if (!status.ok()) Fail(status);
}

absl::Status TrainingLog::WriteStepRow() {
  const double wall_time = EventWallTime(absl::Now());
  const double loss = window_loss_ / window_steps_;
  const bool rate = window_seconds_ > 0;
  const double samples_per_s = rate ? window_samples_ / window_seconds_ : 0;
  const bool norm = last_.grad_norm >= 0;
  RETURN_IF_ERROR(
      train_->Add({"step", "epoch", "wall_time", "loss", "lr", "grad_norm",
                   "samples_per_s"},
                  {absl::StrCat(last_.step), absl::StrCat(last_.epoch + 1),
                   WallTimeCell(wall_time), CsvNumber(loss),
                   CsvNumber(last_.lr), norm ? CsvNumber(last_.grad_norm) : "",
                   rate ? CsvNumber(samples_per_s) : ""}));
  std::vector<ScalarValue> values = {
      {"train/loss", loss},
      {"train/lr", last_.lr},
      {"train/epoch", static_cast<double>(last_.epoch + 1)}};
  if (norm) values.push_back({"train/grad_norm", last_.grad_norm});
  if (rate) values.push_back({"train/samples_per_s", samples_per_s});
  events_->Add(ScalarsEvent(wall_time, last_.step, values));
  window_steps_ = 0;
  window_loss_ = 0;
  window_samples_ = 0;
  window_seconds_ = 0;
  ++unflushed_rows_;
  return absl::OkStatus();
}

void TrainingLog::Evaluated(
    int64_t step, int64_t epoch,
    const std::vector<std::pair<std::string, double>>& metrics) {
  if (failed_) return;
  const double wall_time = EventWallTime(absl::Now());
  std::vector<std::string> columns = {"step", "epoch", "wall_time"};
  std::vector<std::string> cells = {absl::StrCat(step), absl::StrCat(epoch + 1),
                                    WallTimeCell(wall_time)};
  std::vector<ScalarValue> values;
  for (const auto& [name, value] : metrics) {
    columns.push_back(name);
    cells.push_back(CsvNumber(value));
    values.push_back({absl::StrCat("eval/", name), value});
  }
  events_->Add(ScalarsEvent(wall_time, step, values));
  absl::Status status = eval_->Add(columns, cells);
  // An evaluation is rare and worth keeping at once.
  if (status.ok()) status = Flush();
  if (!status.ok()) Fail(status);
}

void TrainingLog::Close() {
  if (failed_) return;
  absl::Status status = window_steps_ > 0 ? WriteStepRow() : absl::OkStatus();
  if (status.ok()) status = Flush();
  if (!status.ok()) Fail(status);
}

absl::Status TrainingLog::Flush() {
  RETURN_IF_ERROR(train_->Flush());
  RETURN_IF_ERROR(eval_->Flush());
  RETURN_IF_ERROR(events_->Flush());
  unflushed_rows_ = 0;
  last_flush_ = absl::Now();
  return absl::OkStatus();
}

void TrainingLog::Fail(const absl::Status& s) {
  failed_ = true;
  std::fprintf(stderr,
               "cohort: cannot write the training log in %s (%s); training "
               "goes on without it\n",
               dir_.c_str(), std::string(s.message()).c_str());
}

}  // namespace cohort
