// The coordinator's state machine, free of gRPC: rendezvous rounds and
// generations, heartbeats and the watchdog that fails a job whose worker
// went silent, per-epoch sampler seeds, Finish/Stop, and the status,
// metrics and report views of the job.
//
// A job is FORMING until a rendezvous round completes (max_workers joined,
// or min_workers joined and the last-call window passed), then RUNNING in
// generation 1; it ends SUCCEEDED (every worker finished ok), FAILED (a
// worker failed or missed heartbeats) or STOPPED (Stop, Shutdown). Time is
// measured on receipt with std::chrono::steady_clock; worker clocks are
// never compared.
//
// Ownership and threads: the tracker owns the job spec, the KV store and a
// watchdog thread (started by the constructor, joined by Shutdown or the
// destructor). All methods are thread-safe; Join, WaitForEnd and the KV
// store's Wait block only their caller, and Shutdown wakes them all.
#ifndef COHORT_SERVER_JOB_TRACKER_H_
#define COHORT_SERVER_JOB_TRACKER_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "server/kv_store.h"

namespace cohort {

// splitmix64(job_seed ^ splitmix64(epoch)): the same for every worker, and
// different epochs give unrelated seeds.
uint64_t SamplerSeed(uint64_t job_seed, int64_t epoch);

bool IsTerminal(JobState state);

class JobTracker {
 public:
  using Clock = std::chrono::steady_clock;

  // `job`'s cluster defaults must be filled and checked. With a
  // `state_path`, the tracker keeps its durable state there (Restore).
  explicit JobTracker(JobSpec job, std::string state_path = "");

  // Loads the state a previous coordinator left at state_path, if any: the
  // same generation, members, epoch and finished workers' results, with
  // every member's heartbeat clock restarted. FAILED_PRECONDITION when the
  // state belongs to another job (or a PS job: not restartable yet),
  // DATA_LOSS when it cannot be parsed. Call before serving.
  absl::Status Restore();
  ~JobTracker();
  JobTracker(const JobTracker&) = delete;
  JobTracker& operator=(const JobTracker&) = delete;

  // Blocks until this worker's round completes, then returns its place.
  // `cancelled` (polled, may be empty) tells that the caller went away.
  absl::StatusOr<JoinResponse> Join(const JoinRequest& request,
                                    const std::function<bool()>& cancelled);
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request);
  // The epoch's sampler seed.
  absl::StatusOr<uint64_t> BeginEpoch(const BeginEpochRequest& request);
  absl::Status Finish(const FinishRequest& request);
  // Ends a job that has not ended as STOPPED; also releases WaitForEnd's
  // `until_stop` wait.
  void Stop(absl::string_view reason);
  // Ends a running job as STOPPED, makes every blocked call return, stops
  // the watchdog. Idempotent.
  void Shutdown();

  // Blocks until the job ends and each surviving worker has seen the end
  // (finished, or a heartbeat answered with it) or a grace period of two
  // heartbeat intervals plus a second passed; with `until_stop`, until Stop
  // or Shutdown instead. Returns the final state.
  JobState WaitForEnd(bool until_stop);

  StatusResponse Status() const;
  MetricsResponse Metrics() const;
  // The report of cohort train's shape plus world_size, state and reason.
  std::string ReportJson() const;

  // PS mode: a shard registers (a retry gets the same index), heartbeats,
  // and workers ask for the partition map. In ALLREDUCE mode these fail
  // with FAILED_PRECONDITION.
  absl::StatusOr<RegisterShardResponse> RegisterShard(
      const RegisterShardRequest& request);
  absl::StatusOr<ShardHeartbeatResponse> ShardHeartbeat(
      const ShardHeartbeatRequest& request);
  absl::StatusOr<PlanPartitionsResponse> PlanPartitions(
      const PlanPartitionsRequest& request);

  KvStore& kv() { return kv_; }
  const JobSpec& job() const { return job_; }

 private:
  // A worker waiting in Join for its round to complete.
  struct Joiner {
    JoinRequest request;
    Clock::time_point joined;
    int waiters = 0;  // Join calls blocked for it (retries share the entry)
  };
  // A worker of the current generation.
  struct Member {
    JoinRequest request;
    int rank = 0;
    int replica_offset = 0;
    Clock::time_point last_seen;
    WorkerProgress progress;
    bool finished = false;
    std::optional<WorkerResult> result;
    bool knows_end = false;  // no need to wait for it to learn the end
    // Straggler detection (UpdateStraggler).
    int64_t last_step = 0;
    int64_t slow_steps = 0;  // consecutive steps above the threshold
    double busy_s = 0;       // own time per step, last window
    double busy_vs_median = 0;
    bool straggler = false;
  };

  // A registered parameter-server shard.
  struct Shard {
    RegisterShardRequest request;
    Clock::time_point last_seen;
    ShardStats stats;
    bool knows_end = false;
  };

  bool PsMode() const { return job_.mode() == PS; }
  int NumShards() const {
    return PsMode() ? std::max(1, job_.ps().shards()) : 0;
  }
  // Rounds complete only once every shard has registered.
  bool ShardsReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(shards_.size()) >= NumShards();
  }
  absl::Status RequirePsMode(absl::string_view what) const;
  ShardStatus DescribeShard(int index, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int MinWorkers() const { return job_.cluster().min_workers(); }
  int MaxWorkers() const { return job_.cluster().max_workers(); }
  absl::Status CheckCanJoin(const JoinRequest& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddJoiner(const JoinRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AwaitRound(uint64_t generation, Clock::time_point deadline,
                          const std::function<bool()>& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<Clock::time_point> LastCallEnd() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status JoinTimeout(Clock::duration waited) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaveRound(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<int> AssignRanks() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JoinResponse Assignment(const Member& m) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The member a Heartbeat or Finish request (`request_name`) comes from.
  absl::StatusOr<Member*> FindCaller(absl::string_view request_name,
                                     uint64_t generation,
                                     const std::string& worker_id, int32_t rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void End(JobState state, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckHeartbeats() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After `m`'s heartbeat: compares its own step time with the median of
  // the other live workers' and counts the steps it stays above
  // kStragglerRatio; kStragglerSteps of them make it a straggler.
  void UpdateStraggler(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rate limit for Join (a token bucket); UNAVAILABLE when empty.
  absl::Status TakeJoinToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> Stragglers() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Writes the durable state (after each change of it); failures are
  // logged, since the job itself can go on.
  void Persist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WatchdogLoop();
  bool AllKnowEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WorkerStatus Describe(const Member& m, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<WorkerStatus> Workers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobSpec job_;
  const std::string state_path_;  // empty: not durable
  const Clock::time_point started_;
  KvStore kv_;

  mutable absl::Mutex mu_;
  JobState state_ ABSL_GUARDED_BY(mu_) = FORMING;
  double join_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point join_tokens_refilled_ ABSL_GUARDED_BY(mu_);
  std::string reason_ ABSL_GUARDED_BY(mu_);
  Clock::time_point ended_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // The forming round, in join order; `round_changes_` wakes Join waiters
  // when the last-call deadline may have moved.
  std::vector<Joiner> joiners_ ABSL_GUARDED_BY(mu_);
  std::optional<Clock::time_point> min_reached_ ABSL_GUARDED_BY(mu_);
  uint64_t round_changes_ ABSL_GUARDED_BY(mu_) = 0;
  // The current generation, indexed by rank.
  std::vector<Member> members_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> rank_of_ ABSL_GUARDED_BY(mu_);
  // Ranks of earlier generations, kept so that a worker keeps its rank.
  absl::flat_hash_map<std::string, int> previous_ranks_ ABSL_GUARDED_BY(mu_);
  // PS mode: shards by index, and the partition plan (fixed by the first
  // PlanPartitions call, with the parameter sizes it was made for).
  std::vector<Shard> shards_ ABSL_GUARDED_BY(mu_);
  std::vector<Partition> plan_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> plan_sizes_ ABSL_GUARDED_BY(mu_);
  int plan_rank_ ABSL_GUARDED_BY(mu_) = -1;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace cohort

#endif  // COHORT_SERVER_JOB_TRACKER_H_
