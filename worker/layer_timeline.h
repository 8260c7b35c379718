// A LayerTrace (worker/layers/layer_trace.h) that adds each layer's
// Forward and Backward call to a Timeline (worker/timeline.h) as a
// complete event on one lane, inside the replica's own "forward" and
// "backward" events there; "args" says which pass ("pass": "backward").
//
// Ownership: borrows the timeline, which must outlive it. Thread safety:
// one thread reports to it (its replica's); the timeline itself takes
// events from any thread.
#ifndef COHORT_WORKER_LAYER_TIMELINE_H_
#define COHORT_WORKER_LAYER_TIMELINE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/layers/layer_trace.h"
#include "worker/timeline.h"

namespace cohort {

class LayerTimeline final : public LayerTrace {
 public:
  LayerTimeline(Timeline* timeline, int lane)
      : timeline_(timeline), lane_(lane) {}

  void Begin() override;
  void End(const std::string& name, bool backward) override;

 private:
  Timeline* const timeline_;
  const int lane_;
  std::vector<absl::Time> open_;  // the start of each call still open
};

}  // namespace cohort

#endif  // COHORT_WORKER_LAYER_TIMELINE_H_
