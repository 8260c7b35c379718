#include "worker/heartbeat.h"

#include <algorithm>

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

// Beats go out on a fixed schedule, one interval apart, and each waits up
// to an interval for the connection and its answer
// (CoordinatorClient::Heartbeat): while the coordinator cannot be reached
// one is always waiting, and goes out the moment the connection is back.
void HeartbeatSender::Loop() {
  absl::Time last_answer = absl::Now();
  bool signalled = false;
  absl::Time next = absl::Now() + interval_;
  while (!done_.WaitForNotificationWithDeadline(next)) {
    // A beat that took longer than an interval is followed at once.
    next = std::max(next + interval_, absl::Now());
    WorkerProgress p;
    {
      absl::MutexLock lock(&mu_);
      p = progress_;
    }
    absl::StatusOr<HeartbeatResponse> r = client_->Heartbeat(p);
    // The owner has moved on (its generation ended) while this call was in
    // flight: its answer is about a generation this worker has left.
    if (done_.HasBeenNotified()) break;
    if (r.ok()) last_answer = absl::Now();
    const Verdict v = Judge(r, absl::Now() - last_answer);
    if (v.why.ok() || signalled) continue;
    signalled = true;
    {
      absl::MutexLock lock(&mu_);
      stop_ = v.why;
      regroup_ = v.regroup;
      dropped_ = v.dropped;
      lost_ = v.lost;
    }
    if (on_stop_) on_stop_(v);
  }
}

HeartbeatSender::Verdict HeartbeatSender::Judge(
    const absl::StatusOr<HeartbeatResponse>& r, absl::Duration silence) const {
  Verdict v;
  if (r.ok()) {
    if (r->stop()) {
      v.why = absl::AbortedError(
          absl::StrCat("the coordinator stopped the job (",
                       JobState_Name(r->state()), "): ", r->reason()));
      v.orderly = r->state() == STOPPED;
    } else if (r->regroup()) {
      v.regroup = true;
      v.why = absl::AbortedError(
          "this generation is over: the coordinator regroups the job");
    }
  } else if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
    // A refused heartbeat means this worker is no longer part of the job
    // (fenced out after it was declared dead).
    v.dropped = true;
    v.why = absl::FailedPreconditionError(absl::StrCat(
        "dropped from the job by the coordinator: ", r.status().message()));
  } else if (silence > interval_ * misses_) {
    // Silence as long as the coordinator's own bound means the
    // coordinator is gone.
    v.lost = true;
    v.why = absl::UnavailableError(
        absl::StrCat("lost the coordinator: ", r.status().message()));
  }
  return v;
}

}  // namespace cohort
