// Worker heartbeats: progress, the watchdog's check for silent workers
// (shards are checked in job_tracker_shards.cc), and straggler detection.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/job_tracker.h"
#include "server/job_tracker_internal.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using job_tracker_internal::Clock;
using job_tracker_internal::HeartbeatBound;
using job_tracker_internal::Millis;
using job_tracker_internal::Seconds;

// A worker slower than this many times the others' median step ...
constexpr double kStragglerRatio = 1.5;
// ... for this many consecutive steps is a straggler.
constexpr int64_t kStragglerSteps = 20;

double BusySeconds(const WorkerProgress& p) {
  const StepTimes& t = p.times();
  return t.data_s() + t.compute_s() + t.optimizer_s();
}

}  // namespace

absl::StatusOr<HeartbeatResponse> JobTracker::Heartbeat(
    const HeartbeatRequest& request) {
  RETURN_IF_ERROR(CheckHeartbeatRequest(request));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Member * m,
                   FindCaller("HeartbeatRequest", request.generation(),
                              request.worker_id(), request.rank()));
  HeartbeatResponse response;
  if (regroup_) {
    // Generation g is over: tell its members to rejoin. Only those the
    // round still waits for are kept alive by their heartbeats.
    if (!m->rejoined && !m->dead && !m->finished) {
      m->last_seen = Clock::now();
      m->progress = request.progress();
    }
    response.set_state(state_);
    response.set_regroup(true);
    response.set_reason(regroup_->Cause());
    return response;
  }
  m->last_seen = Clock::now();
  m->progress = request.progress();
  if (request.progress().epoch() > epoch_) {
    // Workers of a durable coordinator begin epochs without it while it is
    // unreachable (they know the seed); their heartbeats tell it later.
    epoch_ = request.progress().epoch();
    Persist();
  }
  UpdateStraggler(*m);
  NoteProgress(request.progress());
  response.set_state(state_);
  response.set_stop(state_ == FAILED || state_ == STOPPED);
  response.set_reason(reason_);
  // An answer that tells the end does not mark the worker as knowing it:
  // on a loaded machine the worker's deadline may pass before the answer
  // is read. It knows once it calls Finish, which every worker does on
  // hearing the end; until then (or its heartbeats stop) the coordinator
  // stays to answer its status query (the waits of JobTracker::WaitForEnd).
  return response;
}

// Waiting for peers is left out of the step time: in a synchronous job
// everyone's wall time per step is the straggler's, and only the time a
// worker spends on its own work tells who holds the others up.
void JobTracker::UpdateStraggler(Member& m) {
  m.busy_s = BusySeconds(m.progress);
  const int64_t steps = std::max<int64_t>(0, m.progress.step() - m.last_step);
  m.last_step = std::max(m.last_step, m.progress.step());
  std::vector<double> others;
  for (const Member& o : members_) {
    if (&o != &m && !o.finished && o.busy_s > 0) others.push_back(o.busy_s);
  }
  if (others.empty() || m.busy_s <= 0) {
    m.busy_vs_median = 0;
    return;
  }
  std::sort(others.begin(), others.end());
  const size_t k = others.size();
  const double median =
      k % 2 == 1 ? others[k / 2] : (others[k / 2 - 1] + others[k / 2]) / 2;
  m.busy_vs_median = median > 0 ? m.busy_s / median : 0;
  m.slow_steps = m.busy_vs_median > kStragglerRatio ? m.slow_steps + steps : 0;
  m.straggler = m.slow_steps >= kStragglerSteps;
}

std::vector<std::string> JobTracker::Stragglers() const {
  std::vector<std::string> out;
  for (const Member& m : members_) {
    if (!m.straggler) continue;
    out.push_back(absl::StrFormat("rank %d on %s: %.1fx the median step",
                                  m.rank, m.request.host(), m.busy_vs_median));
  }
  return out;
}

// Every live worker silent at once looks the same from here whether they
// all died together or this coordinator lost its own network; the second is
// far likelier, and a durable coordinator's workers train on through its
// absence for coordinator_grace_ms. So it waits that long (from the newest
// heartbeat) before declaring anyone dead: no restart is spent on its own
// outage. A single worker's silence is judged as before.
bool JobTracker::AllSilentWithinGrace(Clock::time_point now,
                                      Clock::duration limit) {
  if (state_path_.empty()) return false;
  // Beats go out at different phases, so when the first worker crosses the
  // bound the others of a common silence have missed at least a beat or
  // half the bound; a worker that still beats is well inside both.
  const Clock::duration quiet =
      std::max(limit / 2,
               Clock::duration(Millis(job_.cluster().heartbeat_interval_ms())));
  int live = 0;
  Clock::time_point newest = Clock::time_point::min();
  Clock::time_point oldest = Clock::time_point::max();
  for (const Member& m : members_) {
    if (m.finished || m.rejoined || m.dead) continue;
    ++live;
    newest = std::max(newest, m.last_seen);
    oldest = std::min(oldest, m.last_seen);
  }
  if (live < 2 || now - oldest <= limit || now - newest <= quiet) {
    all_silent_logged_ = false;
    return false;
  }
  const Clock::duration grace = Millis(job_.cluster().coordinator_grace_ms());
  if (now - newest > grace) return false;
  // Heartbeats come back one by one when the network returns (each
  // worker's connection is remade on its own): the workers silent in this
  // outage keep their grace after the first one is heard again.
  outage_newest_ = newest;
  outage_until_ = newest + grace;
  if (!all_silent_logged_) {
    all_silent_logged_ = true;
    LOG(WARNING) << "all " << live << " workers went silent at once (for "
                 << Seconds(now - newest)
                 << "s and more): this coordinator's own network is the "
                    "likelier cause; waiting up to coordinator_grace_ms ("
                 << job_.cluster().coordinator_grace_ms() / 1000.0
                 << "s) before declaring any of them dead";
  }
  return true;
}

void JobTracker::CheckHeartbeats() {
  if (state_ != RUNNING) return;
  const Clock::time_point now = Clock::now();
  const Clock::duration limit = HeartbeatBound(job_.cluster());
  if (AllSilentWithinGrace(now, limit)) return;
  // Members that rejoined wait in Join and no longer heartbeat.
  for (Member& m : members_) {
    if (m.finished || m.rejoined || m.dead || now - m.last_seen <= limit) {
      continue;
    }
    if (now < outage_until_ && m.last_seen <= outage_newest_) continue;
    const double silent = Seconds(now - m.last_seen);
    const std::string what = absl::StrFormat(
        "worker rank %d (host %s, pid %d) missed heartbeats for %.1fs", m.rank,
        m.request.host(), m.request.pid(), silent);
    if (!MemberLost(m, what, silent)) return;
  }
  if (!CheckShardHeartbeats(now)) return;
  // A member declared dead may have been the last one the round awaited.
  if (regroup_) CheckRegroup(now);
}

}  // namespace cohort
