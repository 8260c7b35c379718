// A per-step timeline of one worker process, written as Chrome trace-event
// JSON (--timeline=FILE): open it in chrome://tracing or
// https://ui.perfetto.dev to see where each step's time goes.
//
// Events are complete events ("ph": "X") on lanes ("tid"): lane r is local
// replica r's data, forward and backward; kStepLane the training thread's
// waits, optimizer, checkpoints and evaluation; kBucketLane + l the
// all-reduces of bucket lane l (or the pushes and pulls of parameter-server
// mode). Times are Unix microseconds, so the files of several workers on one
// machine can be laid side by side.
//
// Thread safety: Add may be called from any thread. Memory is bounded:
// past kMaxEvents events, further ones are counted, not kept.
#ifndef COHORT_WORKER_TIMELINE_H_
#define COHORT_WORKER_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

class Timeline {
 public:
  static constexpr int kStepLane = 100;
  static constexpr int kBucketLane = 200;
  static constexpr int64_t kMaxEvents = 2'000'000;

  // `pid` tells the workers apart (their rank, or index); `process_name`
  // labels it in the viewer.
  Timeline(int pid, std::string process_name);

  // One event. `args_json`, when not empty, is a JSON object's members
  // (e.g. "\"bytes\": 4096").
  void Add(absl::string_view name, int lane, absl::Time start, absl::Time end,
           absl::string_view args_json = "");

  // Relabels the process (a worker learns its rank after joining).
  void SetProcess(int pid, std::string process_name);

  int64_t size() const;
  // The trace as JSON: {"traceEvents": [...], "displayTimeUnit": "ms"}.
  std::string ToJson() const;
  // Writes ToJson() to `path` atomically (no half-written file).
  absl::Status Write(const std::string& path) const;

 private:
  struct Event {
    std::string name;
    int lane;
    int64_t start_us;
    int64_t duration_us;
    std::string args;
  };

  mutable absl::Mutex mu_;
  int pid_ ABSL_GUARDED_BY(mu_);
  std::string process_name_ ABSL_GUARDED_BY(mu_);
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_TIMELINE_H_
