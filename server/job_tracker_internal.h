// Helpers shared by the files that define JobTracker's members
// (server/job_tracker*.cc); not part of the tracker's interface, and
// visible only inside the job_tracker library.
#ifndef COHORT_SERVER_JOB_TRACKER_INTERNAL_H_
#define COHORT_SERVER_JOB_TRACKER_INTERNAL_H_

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "server/job_tracker.h"

namespace cohort {
namespace job_tracker_internal {

using Clock = JobTracker::Clock;

inline absl::Duration ToAbsl(Clock::duration d) { return absl::FromChrono(d); }

inline Clock::duration Millis(int64_t ms) {
  return std::chrono::milliseconds(ms);
}

inline double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// How long a worker or shard may stay silent before it is declared dead.
inline Clock::duration HeartbeatBound(const ClusterSpec& c) {
  return Millis(c.heartbeat_interval_ms() * c.heartbeat_misses());
}

// The poll period of blocked calls for their client's cancellation.
inline constexpr Clock::duration kPoll = std::chrono::milliseconds(100);

}  // namespace job_tracker_internal
}  // namespace cohort

#endif  // COHORT_SERVER_JOB_TRACKER_INTERNAL_H_
