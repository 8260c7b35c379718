// Makes a termination signal (SIGTERM, SIGINT: TrainOptions::stop_signal)
// take effect within a second or two in every phase of a worker, not only
// at the training loop's step boundaries.
//
// - While the worker waits for something that holds no training state
//   (joining the job, connecting to its peers, waiting for the
//   coordinator's verdict), the process ends at once: those waits cannot be
//   interrupted in place, may last their whole timeout (a Gloo connect to
//   an unreachable peer), and there is nothing to save.
// - While it trains, the step in flight may finish (the loop then stops
//   with its final checkpoint); a step still blocked `step_grace` after the
//   signal (a collective waiting on a peer that is gone) has its
//   collectives aborted, and the loop stops as if at the step boundary.
//
// Ownership: owns its polling thread. Thread safety: the phase objects may
// be created and destroyed on any thread, one phase at a time; the
// process never exits for a phase that has ended (the exit decision and
// the phase's end take the same lock).
#ifndef COHORT_WORKER_STOP_SIGNAL_WATCH_H_
#define COHORT_WORKER_STOP_SIGNAL_WATCH_H_

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/collective_interrupt.h"

namespace cohort {

class StopSignalWatch {
 public:
  // `signal` may be null (no signal to watch); it must outlive this object.
  StopSignalWatch(const std::atomic<bool>* signal, absl::Duration step_grace);
  ~StopSignalWatch();
  StopSignalWatch(const StopSignalWatch&) = delete;
  StopSignalWatch& operator=(const StopSignalWatch&) = delete;

  // The coordinator ended the job (or dropped this worker): a worker in a
  // wait with nothing to save leaves now, naming `why`, rather than when
  // the wait times out. Any thread.
  void EndIfWaiting(const absl::Status& why);

  // A wait with nothing to save; `what` ("joining the job") names it in
  // the process's last line. A wait still going at `deadline` ends the
  // process too, with `late` ("a peer's address is ...") saying what that
  // usually means: Gloo's connect cannot be interrupted, and to an
  // unreachable peer it outlasts its own timeout many times over. Static
  // storage for both texts: they are not copied.
  class Waiting {
   public:
    Waiting(StopSignalWatch* watch, const char* what,
            absl::Time deadline = absl::InfiniteFuture(),
            const char* late = "");
    ~Waiting();
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    StopSignalWatch* const watch_;
  };

  // Training whose collectives `interrupt` can abort.
  class Training {
   public:
    Training(StopSignalWatch* watch, CollectiveInterrupt* interrupt);
    ~Training();
    Training(const Training&) = delete;
    Training& operator=(const Training&) = delete;

   private:
    StopSignalWatch* const watch_;
  };

 private:
  void Loop();
  void Set(const char* waiting, absl::Time deadline, const char* late,
           CollectiveInterrupt* training);
  // Ends the process if the current wait is past its deadline.
  void CheckDeadline() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::atomic<bool>* const signal_;
  const absl::Duration step_grace_;
  absl::Mutex mu_;
  const char* waiting_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  const char* late_ ABSL_GUARDED_BY(mu_) = "";
  absl::Time waiting_since_ ABSL_GUARDED_BY(mu_);
  CollectiveInterrupt* training_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_STOP_SIGNAL_WATCH_H_
