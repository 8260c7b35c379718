// Sends a worker's heartbeats, with its latest progress, on a thread of its
// own, and turns the coordinator's answers into a stop signal.
//
// The worker learns that it must stop when the coordinator says so (the job
// failed or was stopped), when the coordinator refuses its heartbeats (it
// was dropped from the job: fenced out), or when the coordinator has not
// answered for as long as it would take the coordinator to declare this
// worker dead. An elastic job's coordinator may instead answer that the
// worker's generation is over (Regroup): the worker then leaves it and joins
// the next one.
//
// Thread safety: Update() and StopReason() may be called from any thread.
#ifndef COHORT_WORKER_HEARTBEAT_H_
#define COHORT_WORKER_HEARTBEAT_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"

namespace cohort {

class HeartbeatSender {
 public:
  // What the coordinator's first stop signal asks of the worker (passed to
  // on_stop).
  struct Verdict {
    absl::Status why;
    // The generation is over and the worker joins the next one.
    bool regroup = false;
    // The coordinator refused the heartbeat: it declared this worker dead
    // (a cut link, a long pause) and fenced it out of the generation. An
    // elastic job's worker may join anew.
    bool dropped = false;
    // No answer from the coordinator for the heartbeat bound (its own
    // outage, or this worker's link cut). An elastic job's worker tries to
    // join anew for --connect-timeout: a cut link that returns rejoins.
    bool lost = false;
    // The job is stopping in order (a user's Stop): the worker finishes
    // the step in flight and writes its final checkpoint, so collectives in
    // flight must be left to complete.
    bool orderly = false;
  };
  // `client` must outlive the sender. `on_stop` (optional) is called once,
  // from the heartbeat thread, when a stop signal first arrives.
  HeartbeatSender(CoordinatorClient* client, absl::Duration interval,
                  int misses, std::function<void(const Verdict&)> on_stop);
  ~HeartbeatSender();  // stops the thread

  void Update(const WorkerProgress& progress);
  // OK while the worker may go on; otherwise why it must stop (or leave
  // its generation, when Regroup()).
  absl::Status StopReason();
  // Whether the coordinator said this generation is over.
  bool Regroup();
  // Whether the coordinator dropped this worker from the job (Verdict).
  bool Dropped();
  // Whether the coordinator stopped answering (Verdict).
  bool Lost();

 private:
  void Loop();
  // What the answer `r`, after `silence` since the last one, asks of the
  // worker (an OK `why`: nothing).
  Verdict Judge(const absl::StatusOr<HeartbeatResponse>& r,
                absl::Duration silence) const;

  CoordinatorClient* const client_;
  const absl::Duration interval_;
  const int misses_;
  std::function<void(const Verdict&)> on_stop_;
  absl::Mutex mu_;
  WorkerProgress progress_ ABSL_GUARDED_BY(mu_);
  absl::Status stop_ ABSL_GUARDED_BY(mu_);
  bool regroup_ ABSL_GUARDED_BY(mu_) = false;
  bool dropped_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_HEARTBEAT_H_
