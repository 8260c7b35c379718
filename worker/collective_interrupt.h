// Lets the heartbeat thread end a collective that the training thread is
// blocked in, once the coordinator's verdict arrives (this generation is
// over, the job stopped, or this worker was dropped). Without it, the
// survivors of a silently cut peer would wait in their all-reduce for the
// whole collective timeout although the coordinator declared the peer dead
// within its heartbeat bound.
//
// Thread safety: every method may be called from any thread. Interrupt()
// holds the lock while it aborts, so a communicator is never aborted after
// Detach() returns; the owner calls Detach() before destroying it.
#ifndef COHORT_WORKER_COLLECTIVE_INTERRUPT_H_
#define COHORT_WORKER_COLLECTIVE_INTERRUPT_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/communicator.h"
#include "worker/comm/connect_abort.h"

namespace cohort {

class CollectiveInterrupt {
 public:
  // The communicator the training thread's collectives run on; aborted at
  // once when the verdict has already come.
  void Attach(Communicator* comm);
  // The connect that makes that communicator (a Gloo rendezvous): a verdict
  // that comes while the ranks connect ends it too, at once.
  void Attach(ConnectAbort* connect);
  void Detach();
  // Aborts whatever is attached with `why` (and anything attached later).
  void Interrupt(const absl::Status& why);

 private:
  absl::Mutex mu_;
  Communicator* comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  ConnectAbort* connect_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
};

// Attaches `comm` (or a connect) to `interrupt` for the life of this object.
class ScopedInterruptible {
 public:
  template <typename Abortable>
  ScopedInterruptible(CollectiveInterrupt* interrupt, Abortable* abortable)
      : interrupt_(interrupt) {
    interrupt_->Attach(abortable);
  }
  ~ScopedInterruptible() { interrupt_->Detach(); }
  ScopedInterruptible(const ScopedInterruptible&) = delete;
  ScopedInterruptible& operator=(const ScopedInterruptible&) = delete;

 private:
  CollectiveInterrupt* const interrupt_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_COLLECTIVE_INTERRUPT_H_
