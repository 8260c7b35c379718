// Rendezvous: Join, the forming round (first or regroup), its completion
// into a generation with ranks and replica offsets, and the join rate limit.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/job_tracker.h"
#include "server/job_tracker_internal.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using job_tracker_internal::Clock;
using job_tracker_internal::HeartbeatBound;
using job_tracker_internal::kPoll;
using job_tracker_internal::Millis;
using job_tracker_internal::Seconds;
using job_tracker_internal::ToAbsl;

// Joins: a burst of kJoinBurst, then kJoinsPerSecond. A flood of joins (a
// crash-looping pod, a scan) is answered at once with UNAVAILABLE, which
// well-behaved workers retry with backoff, instead of piling up blocked
// calls.
constexpr double kJoinBurst = 64;
constexpr double kJoinsPerSecond = 32;

}  // namespace

absl::StatusOr<JoinResponse> JobTracker::Join(
    const JoinRequest& request, const std::function<bool()>& cancelled) {
  RETURN_IF_ERROR(CheckJoinRequest(request));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(TakeJoinToken());
  auto known = rank_of_.find(request.worker_id());
  if (known != rank_of_.end()) {
    Member& m = members_[known->second];
    // A retried Join whose first answer was lost: same place again.
    if (!Rejoins(request, m)) return Assignment(m);
    RETURN_IF_ERROR(Rejoin(m));
  }
  AwaitRoomForReplacement(cancelled);
  if (absl::Status s = CheckCanJoin(request); !s.ok()) {
    if (absl::IsResourceExhausted(s)) NoteRefused(request, s);
    return s;
  }
  if (state_ == RUNNING && !regroup_) {
    StartRegroup(
        false,
        absl::StrCat("worker ", request.host(), ":", request.pid(), " joined"),
        0);
  }
  // Taken before AddJoiner, which completes the round when it is full.
  const uint64_t generation = generation_ + 1;
  const Clock::time_point deadline =
      Clock::now() + Millis(job_.cluster().join_timeout_ms());
  AddJoiner(request);
  absl::Status round = AwaitRound(generation, deadline, cancelled);
  if (!round.ok()) {
    LeaveRound(request.worker_id());
    return round;
  }
  return Assignment(members_[rank_of_.at(request.worker_id())]);
}

// A replacement is usually started as soon as its predecessor dies, before
// the coordinator has noticed: while an elastic job looks full, a join
// waits (at most the heartbeat bound and a second) for a member to be
// found dead, instead of being refused at once.
void JobTracker::AwaitRoomForReplacement(
    const std::function<bool()>& cancelled) {
  auto full = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == RUNNING && !regroup_ && !shutting_down_ && CanGrow() &&
           static_cast<int>(members_.size()) >= MaxWorkers();
  };
  if (!full()) return;
  const Clock::time_point until =
      Clock::now() + HeartbeatBound(job_.cluster()) + std::chrono::seconds(1);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !full(); };
  while (full() && Clock::now() < until && !(cancelled && cancelled())) {
    const Clock::time_point wake = std::min(until, Clock::now() + kPoll);
    mu_.AwaitWithTimeout(absl::Condition(&changed),
                         ToAbsl(wake - Clock::now()));
  }
}

absl::Status JobTracker::CheckCanJoin(const JoinRequest& r) const {
  if (IsTerminal(state_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_.name(), " has already ended (",
                     JobState_Name(state_), ": ", reason_, ")"));
  }
  if (shutting_down_) {
    return absl::UnavailableError("the coordinator is shutting down");
  }
  // The forming round (first or regroup) is bounded by max_workers, and
  // so is a running generation that a new worker would grow.
  const bool round_full =
      state_ != RUNNING || regroup_
          ? static_cast<int>(joiners_.size()) >= MaxWorkers() &&
                std::none_of(joiners_.begin(), joiners_.end(),
                             [&](const Joiner& j) {
                               return j.request.worker_id() == r.worker_id();
                             })
          : static_cast<int>(members_.size()) >= MaxWorkers();
  if (round_full) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the job already has its maximum of ", MaxWorkers(),
        " workers; worker ", r.host(), ":", r.pid(),
        " cannot join (for more, start the coordinator with --workers=N or "
        "--max-workers=N, or raise cluster.max_workers in the job spec)"));
  }
  if (state_ == RUNNING && !regroup_ && !CanGrow()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_.name(), " is already running generation ", generation_,
        " with ", members_.size(), " workers; joining a running job needs ",
        PsMode() ? "an all-reduce job (parameter-server jobs keep their "
                   "workers)"
                 : "elastic recovery (cluster.max_restarts > 0; it is 0)"));
  }
  return absl::OkStatus();
}

// A worker turned away for want of room is the operator's business (too
// few workers allowed, or one started twice): the coordinator's log and
// status say so, not only the refused worker's.
void JobTracker::NoteRefused(const JoinRequest& r, const absl::Status& why) {
  ++refused_workers_;
  last_refusal_ = std::string(why.message());
  LOG(WARNING) << "refused worker " << r.host() << ":" << r.pid()
               << ": the job already has its maximum of " << MaxWorkers()
               << " workers (raise it with the coordinator's --workers or "
                  "--max-workers, or cluster.max_workers)";
}

void JobTracker::AddJoiner(const JoinRequest& r) {
  ++round_changes_;
  for (Joiner& j : joiners_) {
    if (j.request.worker_id() == r.worker_id()) {
      j.request = r;  // the same worker re-joining: refresh, keep its place
      ++j.waiters;
      return;
    }
  }
  joiners_.push_back(Joiner{r, Clock::now(), 1});
  const int n = joiners_.size();
  LOG(INFO) << "worker " << r.host() << ":" << r.pid() << " joined (" << n
            << " of " << MinWorkers() << ".." << MaxWorkers() << ")";
  if (n == MinWorkers()) min_reached_ = Clock::now();
  // The last-call window is AwaitRound's business.
  // A regroup completes on its own terms (RegroupReady): a full house must
  // not form a generation that the restarts budget no longer allows.
  if (regroup_ ? RegroupReady() : n == MaxWorkers() && ShardsReady()) {
    CompleteRound();
  }
}

std::optional<Clock::time_point> JobTracker::LastCallEnd() const {
  if (!min_reached_) return std::nullopt;
  return *min_reached_ + Millis(job_.cluster().last_call_ms());
}

absl::Status JobTracker::AwaitRound(uint64_t generation,
                                    Clock::time_point deadline,
                                    const std::function<bool()>& cancelled) {
  const Clock::time_point start = Clock::now();
  while (true) {
    if (generation_ >= generation) return absl::OkStatus();
    // ABORTED, not UNAVAILABLE, on shutdown too (Shutdown ends the job
    // first): workers retry UNAVAILABLE, but this answer is final.
    if (IsTerminal(state_)) {
      return absl::AbortedError(
          absl::StrCat("the job ended (", JobState_Name(state_), ": ", reason_,
                       ") before the rendezvous completed"));
    }
    if (shutting_down_) {
      return absl::UnavailableError("the coordinator is shutting down");
    }
    const Clock::time_point now = Clock::now();
    if (RoundReady(now)) {
      CompleteRound();
      continue;
    }
    // A regroup has its own deadline, which the watchdog enforces.
    if (!regroup_ && now >= deadline) return JoinTimeout(now - start);
    if (cancelled && cancelled()) {
      return absl::CancelledError("the client cancelled the join");
    }
    Clock::time_point wake = now + kPoll;
    if (!regroup_) {
      wake = std::min(wake, deadline);
      const std::optional<Clock::time_point> last_call = LastCallEnd();
      if (last_call && *last_call > now) wake = std::min(wake, *last_call);
    }
    const uint64_t seen = round_changes_;
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return generation_ >= generation || round_changes_ != seen ||
             shutting_down_ || IsTerminal(state_);
    };
    mu_.AwaitWithTimeout(absl::Condition(&changed), ToAbsl(wake - now));
  }
}

absl::Status JobTracker::JoinTimeout(Clock::duration waited) const {
  std::vector<std::string> who;
  for (const Joiner& j : joiners_) {
    who.push_back(absl::StrCat(j.request.host(), ":", j.request.pid()));
  }
  const int missing = MinWorkers() - static_cast<int>(joiners_.size());
  std::string shards;
  if (!ShardsReady()) {
    shards = absl::StrFormat("; %d of %d parameter-server shards registered",
                             shards_.size(), NumShards());
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "join timed out after %.1fs (cluster.join_timeout_ms): %d of %d needed "
      "workers joined (%s); %d missing%s",
      Seconds(waited), joiners_.size(), MinWorkers(),
      who.empty() ? "none" : absl::StrJoin(who, ", "), std::max(missing, 0),
      shards));
}

void JobTracker::LeaveRound(const std::string& worker_id) {
  auto it = std::find_if(
      joiners_.begin(), joiners_.end(),
      [&](const Joiner& j) { return j.request.worker_id() == worker_id; });
  if (it == joiners_.end()) return;  // the round completed meanwhile
  if (--it->waiters > 0) return;     // another Join call still waits for it
  joiners_.erase(it);
  ++round_changes_;
  if (static_cast<int>(joiners_.size()) < MinWorkers()) min_reached_.reset();
  // A member of the generation that is over whose rejoin was cancelled is
  // awaited again (it will retry, or the watchdog declares it dead).
  auto member = rank_of_.find(worker_id);
  if (regroup_ && member != rank_of_.end()) {
    Member& m = members_[member->second];
    if (m.rejoined && !m.dead) {
      m.rejoined = false;
      m.knows_end = false;
      m.last_seen = Clock::now();
    }
  }
}

bool JobTracker::RoundReady(Clock::time_point now) const {
  if (regroup_) return RegroupReady();
  if (state_ != FORMING || !ShardsReady()) return false;
  const std::optional<Clock::time_point> last_call = LastCallEnd();
  return static_cast<int>(joiners_.size()) >= MaxWorkers() ||
         (last_call && now >= *last_call);
}

std::vector<int> JobTracker::AssignRanks() const {
  const int n = joiners_.size();
  std::vector<int> rank(n, -1);
  std::vector<bool> taken(n, false);
  for (int i = 0; i < n; ++i) {
    auto it = previous_ranks_.find(joiners_[i].request.worker_id());
    if (it != previous_ranks_.end() && it->second < n && !taken[it->second]) {
      rank[i] = it->second;
      taken[it->second] = true;
    }
  }
  int next = 0;
  for (int i = 0; i < n; ++i) {
    if (rank[i] >= 0) continue;
    while (taken[next]) ++next;
    rank[i] = next;
    taken[next] = true;
  }
  return rank;
}

void JobTracker::CompleteRound() {
  // The one place generations form: whatever path got here, a recovery
  // past cluster.max_restarts ends the job instead.
  if (regroup_ && regroup_->over_budget) {
    FailOverBudget();
    return;
  }
  const std::vector<int> ranks = AssignRanks();
  const Clock::time_point now = Clock::now();
  int64_t previous_step = 0;
  for (const Member& m : members_) {
    previous_step = std::max(previous_step, m.progress.step());
  }
  members_.assign(joiners_.size(), Member());
  rank_of_.clear();
  for (size_t i = 0; i < joiners_.size(); ++i) {
    Member& m = members_[ranks[i]];
    m.request = joiners_[i].request;
    m.rank = ranks[i];
    m.last_seen = now;
    rank_of_[m.request.worker_id()] = m.rank;
    previous_ranks_[m.request.worker_id()] = m.rank;
  }
  int offset = 0;
  for (Member& m : members_) {
    m.replica_offset = offset;
    offset += m.request.replicas();
  }
  joiners_.clear();
  min_reached_.reset();
  ++round_changes_;
  ++generation_;
  state_ = RUNNING;
  kv_.StartGeneration(generation_);
  LOG(INFO) << "generation " << generation_ << " formed: " << members_.size()
            << " workers, " << offset << " replicas"
            << (regroup_ ? absl::StrCat(" (after ", regroup_->Cause(), ")")
                         : "");
  RecordGeneration(previous_step);
  regroup_.reset();
  Persist();
}

JoinResponse JobTracker::Assignment(const Member& m) const {
  JoinResponse r;
  r.set_generation(generation_);
  r.set_rank(m.rank);
  r.set_world_size(members_.size());
  r.set_replica_offset(m.replica_offset);
  const Member& last = members_.back();
  r.set_total_replicas(last.replica_offset + last.request.replicas());
  *r.mutable_job() = job_;
  r.set_job_seed(job_.seed());
  r.set_epoch(0);
  r.set_step(0);
  r.set_kv_prefix(absl::StrCat("g", generation_, "/"));
  r.set_coordinator_durable(!state_path_.empty());
  r.set_restarts(restarts_);
  for (const Shard& shard : shards_) {
    r.add_shard_addresses(shard.request.address());
  }
  r.mutable_worker_addresses()->Reserve(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) r.add_worker_addresses();
  for (const Member& w : members_) {
    if (w.rank >= 0 && w.rank < r.worker_addresses_size()) {
      r.set_worker_addresses(w.rank, w.request.address());
    }
  }
  return r;
}

absl::Status JobTracker::TakeJoinToken() {
  const Clock::time_point now = Clock::now();
  if (join_tokens_refilled_ == Clock::time_point()) {
    join_tokens_ = kJoinBurst;
  } else {
    const double elapsed =
        std::chrono::duration<double>(now - join_tokens_refilled_).count();
    join_tokens_ =
        std::min(kJoinBurst, join_tokens_ + elapsed * kJoinsPerSecond);
  }
  join_tokens_refilled_ = now;
  if (join_tokens_ < 1) {
    return absl::UnavailableError(
        absl::StrCat("too many join attempts (more than ", kJoinsPerSecond,
                     " a second); retry later"));
  }
  join_tokens_ -= 1;
  return absl::OkStatus();
}

}  // namespace cohort
