// Exits the process if it is still in the same generation a grace period
// after the coordinator told it to stop: a collective stuck on a stopped
// (not dead) peer would otherwise wait for its full timeout. Unlike a
// detached timer it is cancelled when its owner goes away, so a worker
// that has moved on (rejoined a later generation, or returned normally)
// is never killed by a stale stop.
//
// Ownership: owns its timer thread. Thread safety: Arm() once, from any
// thread; the destructor must not run concurrently with Arm() (the owner
// destroys whatever calls Arm first).
#ifndef COHORT_WORKER_STOP_WATCHDOG_H_
#define COHORT_WORKER_STOP_WATCHDOG_H_

#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace cohort {

class StopWatchdog {
 public:
  explicit StopWatchdog(absl::Duration grace) : grace_(grace) {}
  ~StopWatchdog();  // cancels a pending exit
  StopWatchdog(const StopWatchdog&) = delete;
  StopWatchdog& operator=(const StopWatchdog&) = delete;

  // Starts the grace period; at its end the process prints `why` and exits
  // with status 1, unless this object is destroyed first.
  void Arm(const absl::Status& why);

 private:
  const absl::Duration grace_;
  absl::Notification cancel_;
  std::thread thread_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_STOP_WATCHDOG_H_
