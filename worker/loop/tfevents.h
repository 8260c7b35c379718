// TensorBoard event files: TFRecord files (worker/loop/tfrecord.h) of
// Event protocol buffers, as TensorBoard's event.proto and summary.proto
// define them. The few messages a training log needs are encoded by hand
// here, field numbers and wire types as TensorBoard's:
//
//   Event      { double wall_time = 1; int64 step = 2;
//                oneof what { string file_version = 3; Summary summary = 5;
//                             SessionLog session_log = 7; } }
//   Summary    { repeated Value value = 1; }
//   Value      { string tag = 1; oneof value { float simple_value = 2; } }
//   SessionLog { SessionStatus status = 1; }  // START = 1
//
// A file starts with an Event whose file_version is "brain.Event:2". A
// SessionLog START at step S tells TensorBoard that a run restarted there,
// so that it drops the earlier events from step S on (a resumed run's
// steps are not shown twice).
//
// The encoders are pure and thread-safe. EventFileWriter: owns its file;
// not thread-safe (one thread writes).
#ifndef COHORT_WORKER_LOOP_TFEVENTS_H_
#define COHORT_WORKER_LOOP_TFEVENTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/loop/append_file.h"

namespace cohort {

// One scalar of a Summary (TensorBoard keeps it as a float32).
struct ScalarValue {
  std::string tag;  // e.g. "train/loss", "eval/accuracy"
  double value = 0;
};

// Seconds since the Unix epoch, as Event.wall_time holds them.
double EventWallTime(absl::Time t);

// The first event of every file.
std::string FileVersionEvent(double wall_time);
// A SessionLog START: the run (re)starts at `step`.
std::string SessionStartEvent(double wall_time, int64_t step);
// A Summary of simple_value scalars at `step`.
std::string ScalarsEvent(double wall_time, int64_t step,
                         const std::vector<ScalarValue>& values);

// "events.out.tfevents.<seconds, 10 digits>.<host>", TensorBoard's naming;
// characters of `host` other than letters, digits, '.', '-' and '_'
// become '_'.
std::string EventFileName(absl::Time created, absl::string_view host);

class EventFileWriter {
 public:
  // A new file in `dir` named EventFileName(now, this machine's host
  // name), with ".1", ".2", ... after the name while it is taken (another
  // run's file is never appended to), holding the file_version event.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(
      const std::string& dir, absl::Time now);

  // Buffers one record holding `event` (an encoding above).
  void Add(absl::string_view event);
  absl::Status Flush() { return file_->Flush(); }
  const std::string& path() const { return file_->path(); }

 private:
  explicit EventFileWriter(std::unique_ptr<AppendFile> file)
      : file_(std::move(file)) {}

  std::unique_ptr<AppendFile> file_;
  std::string record_;  // reused for each record's framing
};

}  // namespace cohort

#endif  // COHORT_WORKER_LOOP_TFEVENTS_H_
