// Rendezvous, heartbeats, seeding and the job's life cycle. The status,
// metrics and report views are in job_tracker_views.cc.
#include "server/job_tracker.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/partition.h"
#include "common/status_macros.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using Clock = JobTracker::Clock;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

absl::Duration ToAbsl(Clock::duration d) { return absl::FromChrono(d); }

Clock::duration Millis(int64_t ms) { return std::chrono::milliseconds(ms); }

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The poll period of blocked calls for their client's cancellation.
constexpr Clock::duration kPoll = std::chrono::milliseconds(100);

// The most of a shard's failure text kept in the job's reason.
constexpr size_t kMaxShardFailureBytes = 2048;

std::string NewRunId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

}  // namespace

uint64_t SamplerSeed(uint64_t job_seed, int64_t epoch) {
  return SplitMix64(job_seed ^ SplitMix64(static_cast<uint64_t>(epoch)));
}

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

void JobTracker::Persist() {
  if (state_path_.empty()) return;
  CoordinatorState st;
  *st.mutable_job() = job_;
  st.set_state(state_);
  st.set_reason(reason_);
  st.set_generation(generation_);
  st.set_epoch(epoch_);
  for (const Member& m : members_) {
    CoordinatorState::Member* out = st.add_members();
    *out->mutable_request() = m.request;
    out->set_rank(m.rank);
    out->set_replica_offset(m.replica_offset);
    out->set_finished(m.finished);
    if (m.result) {
      *out->mutable_result() = *m.result;
    }
  }
  st.set_restarts(restarts_);
  for (const GenerationRecord& r : generations_) *st.add_generations() = r;
  absl::Status s = WriteFileAtomically(state_path_, st.SerializeAsString());
  if (!s.ok()) {
    LOG(ERROR) << "cannot save the coordinator's state to " << state_path_
               << ": " << s.message()
               << " (a restarted coordinator would not find this job)";
  }
}

absl::Status JobTracker::Restore() {
  if (state_path_.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> bytes = ReadFile(state_path_);
  if (absl::IsNotFound(bytes.status())) return absl::OkStatus();  // fresh
  if (!bytes.ok()) return bytes.status();
  CoordinatorState st;
  if (!st.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(
        state_path_, ": not a coordinator state file (corrupt or truncated)"));
  }
  if (st.job().SerializeAsString() != job_.SerializeAsString()) {
    return absl::FailedPreconditionError(
        absl::StrCat(state_path_, " holds the state of another job (\"",
                     st.job().name(), "\"); use another --state-dir"));
  }
  absl::MutexLock lock(&mu_);
  if (st.state() == FORMING) return absl::OkStatus();  // joins start over
  state_ = st.state();
  reason_ = st.reason();
  generation_ = st.generation();
  epoch_ = st.epoch();
  restarts_ = st.restarts();
  generations_.assign(st.generations().begin(), st.generations().end());
  const Clock::time_point now = Clock::now();
  const ClusterSpec& c = job_.cluster();
  const Clock::duration grace = Millis(c.coordinator_grace_ms());
  const Clock::duration bound =
      Millis(c.heartbeat_interval_ms() * c.heartbeat_misses());
  members_.assign(st.members_size(), Member());
  rank_of_.clear();
  for (const CoordinatorState::Member& in : st.members()) {
    if (in.rank() < 0 || in.rank() >= st.members_size()) {
      return absl::DataLossError(absl::StrCat(state_path_, ": member rank ",
                                              in.rank(), " outside [0, ",
                                              st.members_size(), ")"));
    }
    Member& m = members_[in.rank()];
    m.request = in.request();
    m.rank = in.rank();
    m.replica_offset = in.replica_offset();
    m.finished = in.finished();
    m.knows_end = in.finished();
    if (in.has_result()) m.result = in.result();
    // Workers reconnect with backoff after the outage: each member has
    // coordinator_grace_ms from now to come back (as they waited as long
    // for this coordinator), not just the heartbeat bound.
    m.last_seen = now + std::max(Clock::duration::zero(), grace - bound);
    rank_of_[m.request.worker_id()] = m.rank;
    previous_ranks_[m.request.worker_id()] = m.rank;
  }
  if (IsTerminal(state_)) ended_ = now;
  if (generation_ > 0) kv_.StartGeneration(generation_);
  LOG(INFO) << "resumed job " << job_.name() << " from " << state_path_ << ": "
            << JobState_Name(state_) << ", generation " << generation_
            << ", epoch " << epoch_ << ", " << members_.size() << " workers";
  return absl::OkStatus();
}

JobTracker::~JobTracker() { Shutdown(); }

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
  RETURN_IF_ERROR(CheckCanJoin(request));
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
  const ClusterSpec& c = job_.cluster();
  const Clock::time_point until =
      Clock::now() + Millis(c.heartbeat_interval_ms() * c.heartbeat_misses()) +
      std::chrono::seconds(1);
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
    return absl::ResourceExhaustedError(
        absl::StrCat("the job already has its maximum of ", MaxWorkers(),
                     " workers (cluster.max_workers); worker ", r.host(), ":",
                     r.pid(), " cannot join"));
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
  if ((n == MaxWorkers() && ShardsReady()) || (regroup_ && RegroupReady())) {
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
  return r;
}

absl::Status JobTracker::RequirePsMode(absl::string_view what) const {
  if (PsMode()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": job ", job_.name(),
                   " does not use parameter-server shards (its spec has no "
                   "`mode: PS`)"));
}

absl::StatusOr<RegisterShardResponse> JobTracker::RegisterShard(
    const RegisterShardRequest& request) {
  RETURN_IF_ERROR(CheckRegisterShardRequest(request));
  RETURN_IF_ERROR(RequirePsMode("shard registration refused"));
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (shards_[i].request.shard_id() == request.shard_id()) {
      return ShardAssignment(i);  // a retry whose answer was lost
    }
  }
  if (IsTerminal(state_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_.name(), " has already ended (",
                     JobState_Name(state_), ": ", reason_, ")"));
  }
  if (ShardsReady()) {
    for (size_t i = 0; ShardsRestart() && i < shards_.size(); ++i) {
      Shard& shard = shards_[i];
      if (!shard.dead) continue;
      LOG(WARNING) << "parameter-server shard " << i << " at "
                   << request.address() << " (host " << request.host()
                   << ", pid " << request.pid() << ") replaces the one at "
                   << shard.request.address() << ", dead for "
                   << absl::StrFormat("%.1fs",
                                      Seconds(Clock::now() - shard.died));
      shard.request = request;
      shard.last_seen = Clock::now();
      shard.stats = ShardStats();
      shard.knows_end = false;
      shard.dead = false;
      shard.restoring = true;
      ++shard.restarts;
      return ShardAssignment(i);
    }
    const std::string who =
        absl::StrCat("shard ", request.host(), ":", request.pid(), " at ",
                     request.address());
    if (ShardsRestart()) {
      // A spare: its client retries UNAVAILABLE, so it stands by until a
      // shard dies (or its connect timeout passes).
      return absl::UnavailableError(absl::StrCat(
          "the job already has its ", NumShards(),
          " parameter-server shards (ps.shards) and none is dead; ", who,
          " waits to replace one that dies"));
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "the job already has its ", NumShards(),
        " parameter-server shards (ps.shards); ", who, " cannot register"));
  }
  Shard shard;
  shard.request = request;
  shard.last_seen = Clock::now();
  shards_.push_back(std::move(shard));
  ++round_changes_;  // waiting joiners may now complete their round
  LOG(INFO) << "parameter-server shard " << shards_.size() - 1 << " at "
            << request.address() << " registered (" << shards_.size() << " of "
            << NumShards() << ")";
  RegisterShardResponse response = ShardAssignment(shards_.size() - 1);
  if (state_ == FORMING && ShardsReady() &&
      static_cast<int>(joiners_.size()) >= MaxWorkers()) {
    CompleteRound();
  }
  return response;
}

RegisterShardResponse JobTracker::ShardAssignment(int index) const {
  RegisterShardResponse r;
  r.set_shard_index(index);
  r.set_num_shards(NumShards());
  *r.mutable_job() = job_;
  r.set_run_id(run_id_);
  if (shards_[index].restarts == 0) return r;
  for (const Partition& p : plan_) {
    if (p.shard() == index) *r.add_partitions() = p;
  }
  // A shard the plan gives nothing (or, without a plan, one that cannot
  // have been initialized yet) held nothing to restore.
  if (r.partitions().empty()) return r;
  r.set_restore(true);
  r.set_world_size(members_.size());
  if (!members_.empty()) {
    const Member& last = members_.back();
    r.set_total_replicas(last.replica_offset + last.request.replicas());
  }
  return r;
}

absl::StatusOr<ShardHeartbeatResponse> JobTracker::ShardHeartbeat(
    const ShardHeartbeatRequest& request) {
  RETURN_IF_ERROR(CheckShardHeartbeatRequest(request));
  absl::MutexLock lock(&mu_);
  const int i = request.shard_index();
  if (i >= static_cast<int>(shards_.size()) ||
      shards_[i].request.shard_id() != request.shard_id()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", QuoteForMessage(request.shard_id()),
                     " is not registered as shard ", i));
  }
  Shard& shard = shards_[i];
  if (shard.dead) {
    // Declared dead but back before a replacement came (e.g. it was
    // stopped): its state is intact, so it serves on.
    LOG(WARNING) << "parameter-server shard " << i << " at "
                 << shard.request.address() << " is back after "
                 << absl::StrFormat("%.1fs",
                                    Seconds(Clock::now() - shard.last_seen));
    shard.dead = false;
    shard.knows_end = false;
  }
  shard.restoring = false;
  shard.last_seen = Clock::now();
  shard.stats = request.stats();
  if (!request.failure().empty() && !IsTerminal(state_)) {
    End(FAILED, absl::StrCat(
                    "parameter-server shard ", i, " (host ",
                    shard.request.host(), ", pid ", shard.request.pid(),
                    "): ", request.failure().substr(0, kMaxShardFailureBytes)));
  }
  ShardHeartbeatResponse response;
  response.set_state(state_);
  response.set_stop(IsTerminal(state_));
  response.set_reason(reason_);
  if (IsTerminal(state_)) shard.knows_end = true;
  return response;
}

absl::StatusOr<PlanPartitionsResponse> JobTracker::PlanPartitions(
    const PlanPartitionsRequest& request) {
  RETURN_IF_ERROR(CheckPlanPartitionsRequest(request));
  RETURN_IF_ERROR(RequirePsMode("partition plan refused"));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(WrongGeneration(request.generation()));
  RETURN_IF_ERROR(
      CheckRank("PlanPartitionsRequest.rank", request.rank(), members_.size()));
  const std::vector<int64_t> sizes(request.param_sizes().begin(),
                                   request.param_sizes().end());
  if (plan_.empty()) {
    ASSIGN_OR_RETURN(plan_,
                     cohort::PlanPartitions(sizes, NumShards(),
                                            job_.ps().partition_bytes()));
    plan_sizes_ = sizes;
    plan_rank_ = request.rank();
  } else if (sizes != plan_sizes_) {
    size_t i = 0;
    while (i < sizes.size() && i < plan_sizes_.size() &&
           sizes[i] == plan_sizes_[i]) {
      ++i;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", request.rank(), "'s model differs from rank ", plan_rank_,
        "'s: ", sizes.size(), " parameter tensors against ", plan_sizes_.size(),
        ", first difference at tensor ", i));
  }
  PlanPartitionsResponse response;
  for (const Partition& p : plan_) *response.add_partitions() = p;
  return response;
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
  UpdateStraggler(*m);
  NoteProgress(request.progress());
  response.set_state(state_);
  response.set_stop(state_ == FAILED || state_ == STOPPED);
  response.set_reason(reason_);
  if (IsTerminal(state_)) m->knows_end = true;
  return response;
}

namespace {

// Joins: a burst of kJoinBurst, then kJoinsPerSecond. A flood of joins (a
// crash-looping pod, a scan) is answered at once with UNAVAILABLE, which
// well-behaved workers retry with backoff, instead of piling up blocked
// calls.
constexpr double kJoinBurst = 64;
constexpr double kJoinsPerSecond = 32;

// A worker slower than this many times the others' median step ...
constexpr double kStragglerRatio = 1.5;
// ... for this many consecutive steps is a straggler.
constexpr int64_t kStragglerSteps = 20;

double BusySeconds(const WorkerProgress& p) {
  const StepTimes& t = p.times();
  return t.data_s() + t.compute_s() + t.optimizer_s();
}

}  // namespace

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

std::vector<std::string> JobTracker::Stragglers() const {
  std::vector<std::string> out;
  for (const Member& m : members_) {
    if (!m.straggler) continue;
    out.push_back(absl::StrFormat("rank %d on %s: %.1fx the median step",
                                  m.rank, m.request.host(), m.busy_vs_median));
  }
  return out;
}

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

void JobTracker::CheckHeartbeats() {
  if (state_ != RUNNING) return;
  const Clock::time_point now = Clock::now();
  const Clock::duration limit = Millis(job_.cluster().heartbeat_interval_ms() *
                                       job_.cluster().heartbeat_misses());
  // Members that rejoined wait in Join and no longer heartbeat.
  for (Member& m : members_) {
    if (m.finished || m.rejoined || m.dead || now - m.last_seen <= limit) {
      continue;
    }
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

bool JobTracker::CheckShardHeartbeats(Clock::time_point now) {
  const Clock::duration limit = Millis(job_.cluster().heartbeat_interval_ms() *
                                       job_.cluster().heartbeat_misses());
  const int64_t wait_ms = job_.cluster().join_timeout_ms();
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = shards_[i];
    if (shard.dead) {
      if (now - shard.died <= Millis(wait_ms)) continue;
      End(FAILED,
          absl::StrFormat("parameter-server shard %d at %s (host %s, pid %d) "
                          "died and no replacement registered within "
                          "cluster.join_timeout_ms (%d ms)",
                          i, shard.request.address(), shard.request.host(),
                          shard.request.pid(), wait_ms));
      return false;
    }
    // A replacement heartbeats once restored, which takes a while for a
    // large shard: it gets as long as a replacement gets to register.
    const Clock::duration bound = shard.restoring ? Millis(wait_ms) : limit;
    if (now - shard.last_seen <= bound) continue;
    const std::string what = absl::StrFormat(
        "parameter-server shard %d at %s (host %s, pid %d) %s for %.1fs", i,
        shard.request.address(), shard.request.host(), shard.request.pid(),
        shard.restoring ? "restored nothing and sent no heartbeat"
                        : "missed heartbeats",
        Seconds(now - shard.last_seen));
    shard.knows_end = true;  // it is gone; nobody waits for it to hear
    if (!ShardsRestart()) {
      End(FAILED, what);
      return false;
    }
    shard.dead = true;
    shard.restoring = false;
    shard.died = now;
    LOG(WARNING) << what << "; waiting up to " << wait_ms
                 << " ms (cluster.join_timeout_ms) for a replacement shard "
                    "to restore its checkpoint";
  }
  return true;
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
    // A growth regroup that lost a member is a recovery after all; its
    // record times the failure's detection, not the growth's.
    regroup_->failure = true;
    regroup_->started_wall = absl::Now();
    regroup_->what =
        absl::StrCat(what, " (while regrouping after ", regroup_->what, ")");
    regroup_->silent_s = silent_s;
    ++round_changes_;
  } else {
    StartRegroup(true, what, silent_s);
  }
  regroup_->by_leave = by_leave;
  LOG(WARNING) << "restart " << restarts_ << " of " << budget
               << " (cluster.max_restarts): " << what;
  Persist();
  return true;
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

absl::Status JobTracker::WrongGeneration(uint64_t got) const {
  if (got == generation_ && generation_ != 0) return absl::OkStatus();
  if (got == 0 || got > generation_) return StaleGeneration(got, generation_);
  return absl::FailedPreconditionError(
      absl::StrCat("generation ", got, " is over (the job is at generation ",
                   generation_, "); this worker was dropped from the job"));
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
    const ClusterSpec& c = job_.cluster();
    const Clock::duration bound =
        Millis(c.heartbeat_interval_ms() * c.heartbeat_misses()) +
        std::chrono::seconds(1);
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
  const Clock::time_point grace_end =
      ended_ + 2 * Millis(job_.cluster().heartbeat_interval_ms()) +
      std::chrono::seconds(1);
  auto told = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutting_down_ || AllKnowEnd();
  };
  while (!told() && Clock::now() < grace_end) {
    mu_.AwaitWithTimeout(absl::Condition(&told),
                         ToAbsl(grace_end - Clock::now()));
  }
  return state_;
}

}  // namespace cohort
