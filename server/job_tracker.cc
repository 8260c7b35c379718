// The job's life cycle: construction and the watchdog thread, epochs and
// their seeds, Finish, Stop, End, Shutdown and WaitForEnd, and the fencing
// of requests from another generation. The other responsibilities live in
// job_tracker_{rendezvous,regroup,heartbeats,shards,persistence,views}.cc.
#include "server/job_tracker.h"

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/job_tracker_internal.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using job_tracker_internal::Clock;
using job_tracker_internal::kPoll;
using job_tracker_internal::Millis;
using job_tracker_internal::ToAbsl;

std::string NewRunId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

}  // namespace

bool IsTerminal(JobState state) {
  return state == SUCCEEDED || state == FAILED || state == STOPPED;
}

JobTracker::JobTracker(JobSpec job, std::string state_path)
    : job_(std::move(job)),
      state_path_(std::move(state_path)),
      started_(Clock::now()),
      run_id_(NewRunId()) {
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

JobTracker::~JobTracker() { Shutdown(); }

absl::StatusOr<uint64_t> JobTracker::BeginEpoch(
    const BeginEpochRequest& request) {
  RETURN_IF_ERROR(CheckBeginEpochRequest(request));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(WrongGeneration(request.generation()));
  RETURN_IF_ERROR(
      CheckRank("BeginEpochRequest.rank", request.rank(), members_.size()));
  if (regroup_) return RegroupAborted("BeginEpoch");
  if (request.epoch() > epoch_) {
    epoch_ = request.epoch();
    Persist();
  }
  return SamplerSeed(job_.seed(), request.epoch());
}

absl::Status JobTracker::Finish(const FinishRequest& request) {
  RETURN_IF_ERROR(CheckFinishRequest(request));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Member * m, FindCaller("FinishRequest", request.generation(),
                                          request.worker_id(), request.rank()));
  if (m->finished) return absl::OkStatus();  // a retried Finish
  // Its generation's results are void: the worker goes on in the next one.
  if (regroup_ && request.ok()) return RegroupAborted("Finish");
  // A worker that cannot rejoin (a GPU worker, an error that would recur)
  // ends the job now rather than at the regroup's deadline.
  const std::string during =
      regroup_ ? absl::StrCat(" (while regrouping after ", regroup_->what, ")")
               : "";
  m->finished = true;
  m->knows_end = true;
  m->result = request.result();
  Persist();
  if (IsTerminal(state_)) return absl::OkStatus();
  if (!request.ok()) {
    End(FAILED,
        absl::StrCat("worker rank ", m->rank, " (host ", m->request.host(),
                     "): ",
                     request.error().empty() ? "failed without a message"
                                             : request.error(),
                     during));
  } else if (std::all_of(members_.begin(), members_.end(),
                         [](const Member& w) { return w.finished; })) {
    End(SUCCEEDED, "");
  }
  return absl::OkStatus();
}

void JobTracker::Stop(absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  stop_requested_ = true;
  if (!IsTerminal(state_)) {
    End(STOPPED, reason.empty() ? "stopped by request" : std::string(reason));
  }
}

void JobTracker::End(JobState state, std::string reason) {
  CHECK(IsTerminal(state) && !IsTerminal(state_));
  state_ = state;
  reason_ = std::move(reason);
  ended_ = Clock::now();
  regroup_.reset();
  Persist();
  if (state != SUCCEEDED) {
    kv_.Abort(absl::AbortedError(
        absl::StrCat("the job is ", JobState_Name(state), ": ", reason_)));
  }
  if (state == FAILED) {
    LOG(ERROR) << "job " << job_.name() << " FAILED: " << reason_;
  } else {
    LOG(INFO) << "job " << job_.name() << " " << JobState_Name(state)
              << (reason_.empty() ? "" : ": ") << reason_;
  }
}

absl::StatusOr<JobTracker::Member*> JobTracker::FindCaller(
    absl::string_view request_name, uint64_t generation,
    const std::string& worker_id, int32_t rank) {
  RETURN_IF_ERROR(WrongGeneration(generation));
  RETURN_IF_ERROR(
      CheckRank(absl::StrCat(request_name, ".rank"), rank, members_.size()));
  auto it = rank_of_.find(worker_id);
  if (it == rank_of_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker_id ", QuoteForMessage(worker_id),
                     " is not a member of generation ", generation_));
  }
  if (it->second != rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker_id ", QuoteForMessage(worker_id), " has rank ", it->second,
        " in generation ", generation_, ", not ", rank));
  }
  return &members_[rank];
}

absl::Status JobTracker::WrongGeneration(uint64_t got) const {
  if (got == generation_ && generation_ != 0) return absl::OkStatus();
  if (got == 0 || got > generation_) return StaleGeneration(got, generation_);
  return absl::FailedPreconditionError(
      absl::StrCat("generation ", got, " is over (the job is at generation ",
                   generation_, "); this worker was dropped from the job"));
}

void JobTracker::WatchdogLoop() {
  const Clock::duration tick =
      std::min(kPoll, Millis(job_.cluster().heartbeat_interval_ms()));
  absl::MutexLock lock(&mu_);
  while (!shutting_down_) {
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), ToAbsl(tick));
    if (!shutting_down_) CheckHeartbeats();
  }
}

void JobTracker::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!shutting_down_) {
      shutting_down_ = true;
      if (!IsTerminal(state_)) End(STOPPED, "the coordinator shut down");
    }
  }
  kv_.Abort(absl::UnavailableError("the coordinator is shutting down"));
  if (watchdog_.joinable() &&
      watchdog_.get_id() != std::this_thread::get_id()) {
    watchdog_.join();
  }
}

bool JobTracker::AllKnowEnd() const {
  return std::all_of(members_.begin(), members_.end(),
                     [](const Member& m) { return m.knows_end; }) &&
         std::all_of(shards_.begin(), shards_.end(),
                     [](const Shard& s) { return s.knows_end; });
}

JobState JobTracker::WaitForEnd(bool until_stop) {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return IsTerminal(state_);
  };
  mu_.Await(absl::Condition(&ended));
  if (until_stop) {
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_requested_ || shutting_down_;
    };
    mu_.Await(absl::Condition(&stopped));
    return state_;
  }
  // Two heartbeats and a second for every worker to hear the end. A worker
  // that is still heartbeating but has not heard it (its answers timing out
  // on a loaded machine) is waited for longer, up to its own heartbeat
  // bound: it then asks for the job's status, and learns why the job ended
  // (a dead peer's name) instead of only that the coordinator went silent.
  const ClusterSpec& c = job_.cluster();
  const Clock::duration interval = Millis(c.heartbeat_interval_ms());
  const Clock::time_point grace_end =
      ended_ + 2 * interval + std::chrono::seconds(1);
  const Clock::time_point longest =
      ended_ + (c.heartbeat_misses() + 2) * interval + std::chrono::seconds(3);
  auto told = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutting_down_ || AllKnowEnd();
  };
  while (!told()) {
    const Clock::time_point now = Clock::now();
    Clock::time_point until = grace_end;
    if (now >= grace_end) {
      if (!SomeoneListening(now - 2 * interval)) break;
      until = std::min(longest, now + interval);
    }
    if (now >= until) break;
    mu_.AwaitWithTimeout(absl::Condition(&told), ToAbsl(until - now));
  }
  return state_;
}

bool JobTracker::SomeoneListening(Clock::time_point since) const {
  return std::any_of(members_.begin(), members_.end(), [&](const Member& m) {
    return !m.knows_end && !m.dead && m.last_seen >= since;
  });
}

}  // namespace cohort
