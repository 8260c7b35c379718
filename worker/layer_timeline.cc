#include "worker/layer_timeline.h"

#include "absl/time/clock.h"
#include "common/logging.h"

namespace cohort {

void LayerTimeline::Begin() { open_.push_back(absl::Now()); }

void LayerTimeline::End(const std::string& name, bool backward) {
  const absl::Time end = absl::Now();
  CHECK(!open_.empty()) << "LayerTimeline::End without Begin: " << name;
  const absl::Time start = open_.back();
  open_.pop_back();
  timeline_->Add(name, lane_, start, end,
                 backward ? "\"pass\": \"backward\"" : "\"pass\": \"forward\"");
}

}  // namespace cohort
