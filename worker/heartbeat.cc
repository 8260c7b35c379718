#include "worker/heartbeat.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort {

HeartbeatSender::HeartbeatSender(CoordinatorClient* client,
                                 absl::Duration interval, int misses,
                                 std::function<void(const Verdict&)> on_stop)
    : client_(client),
      interval_(interval),
      misses_(misses),
      on_stop_(std::move(on_stop)),
      thread_([this] { Loop(); }) {}

HeartbeatSender::~HeartbeatSender() {
  done_.Notify();
  thread_.join();
}

void HeartbeatSender::Update(const WorkerProgress& progress) {
  absl::MutexLock lock(&mu_);
  progress_ = progress;
}

absl::Status HeartbeatSender::StopReason() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

bool HeartbeatSender::Regroup() {
  absl::MutexLock lock(&mu_);
  return regroup_;
}

bool HeartbeatSender::Dropped() {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

bool HeartbeatSender::Lost() {
  absl::MutexLock lock(&mu_);
  return lost_;
}

void HeartbeatSender::Loop() {
  absl::Time last_answer = absl::Now();
  bool signalled = false;
  while (!done_.WaitForNotificationWithTimeout(interval_)) {
    WorkerProgress p;
    {
      absl::MutexLock lock(&mu_);
      p = progress_;
    }
    absl::StatusOr<HeartbeatResponse> r = client_->Heartbeat(p);
    // The owner has moved on (its generation ended) while this call was in
    // flight: its answer is about a generation this worker has left.
    if (done_.HasBeenNotified()) break;
    absl::Status stop;
    bool regroup = false;
    bool orderly = false;
    bool dropped = false;
    bool lost = false;
    if (r.ok()) {
      last_answer = absl::Now();
      if (r->stop()) {
        stop = absl::AbortedError(
            absl::StrCat("the coordinator stopped the job (",
                         JobState_Name(r->state()), "): ", r->reason()));
        orderly = r->state() == STOPPED;
      } else if (r->regroup()) {
        regroup = true;
        stop = absl::AbortedError(
            "this generation is over: the coordinator regroups the job");
      }
    } else if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
      // A refused heartbeat means this worker is no longer part of the job
      // (fenced out after it was declared dead).
      dropped = true;
      stop = absl::FailedPreconditionError(absl::StrCat(
          "dropped from the job by the coordinator: ", r.status().message()));
    } else if (absl::Now() - last_answer > interval_ * misses_) {
      // Silence as long as the coordinator's own bound means the
      // coordinator is gone.
      lost = true;
      stop = absl::UnavailableError(
          absl::StrCat("lost the coordinator: ", r.status().message()));
    }
    if (!stop.ok() && !signalled) {
      signalled = true;
      {
        absl::MutexLock lock(&mu_);
        stop_ = stop;
        regroup_ = regroup;
        dropped_ = dropped;
        lost_ = lost;
      }
      if (on_stop_) on_stop_(Verdict{stop, regroup, dropped, lost, orderly});
    }
  }
}

}  // namespace cohort
