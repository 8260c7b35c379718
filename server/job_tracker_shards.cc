// Parameter-server shards: registration (first, retried, a replacement of
// a dead one), their heartbeats and deaths, and the partition plan.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/partition.h"
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

// The most of a shard's failure text kept in the job's reason.
constexpr size_t kMaxShardFailureBytes = 2048;

}  // namespace

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
  // Every index is taken: only a dead shard's replacement may register.
  if (ShardsReady()) return ReplaceShard(request);
  return AddShard(request);
}

absl::StatusOr<RegisterShardResponse> JobTracker::ReplaceShard(
    const RegisterShardRequest& request) {
  for (size_t i = 0; ShardsRestart() && i < shards_.size(); ++i) {
    Shard& shard = shards_[i];
    if (!shard.dead) continue;
    LOG(WARNING) << "parameter-server shard " << i << " at "
                 << request.address() << " (host " << request.host() << ", pid "
                 << request.pid() << ") replaces the one at "
                 << shard.request.address() << ", dead for "
                 << absl::StrFormat("%.1fs",
                                    Seconds(Clock::now() - shard.died));
    const int64_t dead_min_clock =
        std::max(shard.stats.min_clock(), WorkersClock());
    shard.request = request;
    shard.last_seen = Clock::now();
    shard.stats = ShardStats();
    shard.knows_end = false;
    shard.dead = false;
    shard.restoring = true;
    ++shard.restarts;
    RegisterShardResponse r = ShardAssignment(i);
    if (r.restore() && job_.ps().consistency() == SYNC) {
      r.set_dead_min_clock(dead_min_clock);
    }
    return r;
  }
  const std::string who = absl::StrCat(
      "shard ", request.host(), ":", request.pid(), " at ", request.address());
  if (ShardsRestart()) {
    // A spare: its client retries UNAVAILABLE, so it stands by until a
    // shard dies (or its connect timeout passes).
    return absl::UnavailableError(
        absl::StrCat("the job already has its ", NumShards(),
                     " parameter-server shards (ps.shards) and none is dead; ",
                     who, " waits to replace one that dies"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the job already has its ", NumShards(),
      " parameter-server shards (ps.shards); ", who, " cannot register"));
}

RegisterShardResponse JobTracker::AddShard(
    const RegisterShardRequest& request) {
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
  response.set_workers_clock(WorkersClock());
  if (IsTerminal(state_)) shard.knows_end = true;
  return response;
}

// A SYNC worker that reports S steps done pulled the parameters for step S
// from every shard, and a shard answers that pull only once every worker
// pushed every step below S: the most steps any worker reports, whatever
// the others' pace, is a clock below which every worker pushed every step.
// Workers report progress at most every 100 ms, but always before an
// evaluation, which waits for the others (worker/training_loop.cc).
int64_t JobTracker::WorkersClock() const {
  if (job_.ps().consistency() != SYNC) return 0;
  int64_t clock = 0;
  for (const Member& m : members_) {
    clock = std::max(clock, m.progress.step());
    if (m.result) clock = std::max(clock, m.result->steps());
  }
  return clock;
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

bool JobTracker::CheckShardHeartbeats(Clock::time_point now) {
  const Clock::duration limit = HeartbeatBound(job_.cluster());
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

}  // namespace cohort
