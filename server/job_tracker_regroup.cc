// Elastic recovery: members leaving or lost, opening a regroup (failure or
// growth) against the restart budget, its completion or failure at the
// deadline, and the per-generation records.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "server/job_tracker.h"
#include "server/job_tracker_internal.h"

namespace cohort {
namespace {

using job_tracker_internal::Clock;
using job_tracker_internal::HeartbeatBound;
using job_tracker_internal::Millis;

}  // namespace

bool JobTracker::Rejoins(const JoinRequest& r, const Member& m) const {
  if (!Elastic() || state_ != RUNNING) return false;
  // Declared dead, it is fenced: whatever it asks, it may only join anew.
  return m.dead || r.leaving_generation() == generation_;
}

absl::Status JobTracker::Rejoin(Member& m) {
  if (m.rejoined || m.dead) return absl::OkStatus();  // already out of g
  if (m.finished) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker rank ", m.rank, " (host ", m.request.host(),
        ") already finished generation ", generation_, "; it cannot rejoin"));
  }
  m.rejoined = true;
  m.knows_end = true;  // blocked in Join, it hears the end from there
  if (!regroup_) {
    const bool running = Failure(
        absl::StrFormat("worker rank %d (host %s, pid %d) left generation "
                        "%d (its collectives failed: a peer died or stalled)",
                        m.rank, m.request.host(), m.request.pid(), generation_),
        0, /*by_leave=*/true);
    if (!running) {
      return absl::AbortedError(absl::StrCat("job ", job_.name(), " ended (",
                                             JobState_Name(state_), ": ",
                                             reason_, ")"));
    }
  }
  LOG(INFO) << "worker rank " << m.rank << " (host " << m.request.host()
            << ") rejoins after generation " << generation_;
  return absl::OkStatus();
}

bool JobTracker::MemberLost(Member& m, const std::string& what,
                            double silent_s) {
  m.knows_end = true;  // it is gone; nobody waits for it to hear the news
  if (!Elastic()) {
    End(FAILED, what);
    return false;
  }
  m.dead = true;
  LOG(WARNING) << "generation " << generation_ << ": " << what;
  return Failure(what, silent_s);
}

std::string JobTracker::Regroup::Cause() const {
  return absl::StrCat(failure ? "failure: " : "growth: ", what);
}

bool JobTracker::Failure(const std::string& what, double silent_s,
                         bool by_leave) {
  if (regroup_ && regroup_->failure) {
    return FailureInRecovery(what, silent_s, by_leave);
  }
  const int budget = job_.cluster().max_restarts();
  if (restarts_ >= budget && by_leave && !regroup_) {
    // The survivor that reported a broken generation is not the culprit:
    // wait (at most the heartbeat bound) for the dead peer to be named.
    StartRegroup(true, what, 0);
    regroup_->by_leave = true;
    regroup_->over_budget = true;
    return true;
  }
  if (restarts_ >= budget) {
    End(FAILED,
        absl::StrCat(
            what, "; no restarts left (cluster.max_restarts = ", budget, ")"));
    return false;
  }
  ++restarts_;
  if (regroup_) {
    GrowthBecomesFailure(what, silent_s);
  } else {
    StartRegroup(true, what, silent_s);
  }
  regroup_->by_leave = by_leave;
  LOG(WARNING) << "restart " << restarts_ << " of " << budget
               << " (cluster.max_restarts): " << what;
  Persist();
  return true;
}

bool JobTracker::FailureInRecovery(const std::string& what, double silent_s,
                                   bool by_leave) {
  // Counted once per regroup; the first heartbeat death gives silent_s.
  if (regroup_->silent_s == 0) regroup_->silent_s = silent_s;
  // A survivor's report opened it; the dead peer is the real cause.
  if (regroup_->by_leave && !by_leave) {
    regroup_->what =
        absl::StrCat(what, " (its peers' collectives failed ", "first)");
    regroup_->by_leave = false;
  }
  if (regroup_->over_budget && !regroup_->by_leave) {
    FailOverBudget();
    return false;
  }
  return true;
}

// A growth regroup that lost a member is a recovery after all; its record
// times the failure's detection, not the growth's.
void JobTracker::GrowthBecomesFailure(const std::string& what,
                                      double silent_s) {
  regroup_->failure = true;
  regroup_->started_wall = absl::Now();
  regroup_->what =
      absl::StrCat(what, " (while regrouping after ", regroup_->what, ")");
  regroup_->silent_s = silent_s;
  ++round_changes_;
}

void JobTracker::StartRegroup(bool failure, std::string what, double silent_s) {
  regroup_ = Regroup();
  regroup_->failure = failure;
  regroup_->what = std::move(what);
  regroup_->started = Clock::now();
  regroup_->started_wall = absl::Now();
  regroup_->silent_s = silent_s;
  ++round_changes_;
  min_reached_.reset();
  // Collectives bootstrapping through the store must not outlive g.
  kv_.Abort(RegroupAborted(""));
  LOG(INFO) << "generation " << generation_
            << " is over, regrouping: " << regroup_->Cause();
}

absl::Status JobTracker::RegroupAborted(absl::string_view what) const {
  return absl::AbortedError(absl::StrCat(
      what, what.empty() ? "" : " refused: ", "generation ", generation_,
      " is over: the job is regrouping (", regroup_->Cause(),
      "); join again with leaving_generation = ", generation_));
}

int JobTracker::Awaited() const {
  return std::count_if(members_.begin(), members_.end(), [](const Member& m) {
    return !m.finished && !m.rejoined && !m.dead;
  });
}

bool JobTracker::RegroupReady() const {
  if (regroup_->over_budget) return false;  // it can only fail
  const int n = joiners_.size();
  return n >= MaxWorkers() || (Awaited() == 0 && n >= MinWorkers());
}

void JobTracker::FailOverBudget() {
  End(FAILED, absl::StrCat(regroup_->what,
                           "; no restarts left (cluster.max_restarts = ",
                           job_.cluster().max_restarts(), ")"));
}

void JobTracker::CheckRegroup(Clock::time_point now) {
  if (regroup_->over_budget) {
    const Clock::duration bound =
        HeartbeatBound(job_.cluster()) + std::chrono::seconds(1);
    if (now - regroup_->started >= bound) FailOverBudget();
    return;
  }
  if (RegroupReady()) {
    CompleteRound();
    return;
  }
  const Clock::duration timeout = Millis(job_.cluster().join_timeout_ms());
  if (now - regroup_->started < timeout) return;
  const int n = joiners_.size();
  if (n < MinWorkers()) {
    End(FAILED,
        absl::StrFormat("after %s: only %d of cluster.min_workers = %d "
                        "workers rejoined within cluster.join_timeout_ms "
                        "(%d ms)",
                        regroup_->what, n, MinWorkers(),
                        job_.cluster().join_timeout_ms()));
    return;
  }
  // Enough joined: members still training in g after the timeout are left
  // out (their next request is fenced).
  for (Member& m : members_) {
    if (m.finished || m.rejoined || m.dead) continue;
    const std::string what = absl::StrFormat(
        "worker rank %d (host %s, pid %d) did not rejoin within "
        "cluster.join_timeout_ms (%d ms)",
        m.rank, m.request.host(), m.request.pid(),
        job_.cluster().join_timeout_ms());
    if (!MemberLost(m, what, 0)) return;
  }
  CompleteRound();
}

void JobTracker::RecordGeneration(int64_t previous_step) {
  GenerationRecord r;
  r.set_generation(generation_);
  r.set_world_size(members_.size());
  r.set_formed_unix_s(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  r.set_previous_step(previous_step);
  if (regroup_) {
    r.set_cause(regroup_->Cause());
    r.set_after_failure(regroup_->failure);
    r.set_regroup_started_unix_s(
        absl::ToDoubleSeconds(regroup_->started_wall - absl::UnixEpoch()));
    r.set_silent_s(regroup_->silent_s);
  } else {
    r.set_cause("start");
  }
  generations_.push_back(std::move(r));
  if (generations_.size() > kMaxRecords) {
    generations_.erase(generations_.begin(), generations_.end() - kMaxRecords);
  }
}

void JobTracker::NoteProgress(const WorkerProgress& p) {
  if (generations_.empty() || generations_.back().generation() != generation_) {
    return;
  }
  GenerationRecord& r = generations_.back();
  bool changed = false;
  if (r.restored_step() == 0 && p.restored_step() > 0) {
    r.set_restored_step(p.restored_step());
    changed = true;
  }
  if (r.first_step_unix_s() == 0 && p.step() > p.restored_step()) {
    r.set_first_step_unix_s(
        absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    changed = true;
  }
  if (changed) Persist();
}

}  // namespace cohort
