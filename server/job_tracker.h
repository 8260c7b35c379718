// The coordinator's state machine, free of gRPC: rendezvous rounds and
// generations, heartbeats and the watchdog that notices a worker went
// silent, elastic recovery (regroups), per-epoch sampler seeds,
// Finish/Stop, and the status, metrics and report views of the job.
//
// A job is FORMING until a rendezvous round completes (max_workers joined,
// or min_workers joined and the last-call window passed), then RUNNING in
// generation 1; it ends SUCCEEDED (every worker finished ok), FAILED (a
// worker failed, or missed heartbeats past the restarts budget) or STOPPED
// (Stop, Shutdown). Time is measured on receipt with
// std::chrono::steady_clock; worker clocks are never compared.
//
// Elastic recovery (ALLREDUCE jobs only; PS jobs never regroup): while
// RUNNING, generation g may be declared over and a round for g+1 opened
// (a "regroup"): on a failure (a member missed heartbeats, or rejoined with
// leaving_generation == g because its collectives failed), which uses one
// of cluster.max_restarts, or on growth (a new worker joined a job below
// max_workers, allowed when max_restarts > 0). A failure with no restart
// left ends the job FAILED, so max_restarts 0 keeps the fixed world of a
// job without elastic recovery. During a regroup the state stays RUNNING;
// g's heartbeats are answered with `regroup`, its other requests (KV,
// BeginEpoch, Finish) with ABORTED. The round completes when every live
// member of g rejoined and at least min_workers joined, or max_workers
// joined; join_timeout_ms after the regroup began, the job fails if fewer
// than min_workers joined.
//
// Parameter-server shards register (RegisterShard) and heartbeat like
// workers. A shard that misses heartbeats fails the job, unless the job
// writes checkpoints (checkpoint.dir): then the shard is marked dead and
// the job waits up to cluster.join_timeout_ms for a replacement, which
// registers like any shard (a spare registering while none is dead is told
// UNAVAILABLE and retries), takes the dead index, restores that shard's
// newest checkpoint (RegisterShardResponse.restore) and heartbeats within
// join_timeout_ms more (restoring a large shard takes time); workers find
// its address in Status. A dead shard that heartbeats again before a
// replacement came is taken back. A replacement that cannot restore
// reports it in its heartbeat (ShardHeartbeatRequest.failure), which fails
// the job.
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
#include "absl/time/time.h"
#include "common/sampler_seed.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "server/kv_store.h"

namespace cohort {

bool IsTerminal(JobState state);

class JobTracker {
 public:
  using Clock = std::chrono::steady_clock;

  // `job`'s cluster defaults must be filled and checked. With a
  // `state_path`, the tracker keeps its durable state there (Restore).
  explicit JobTracker(JobSpec job, std::string state_path = "");

  // Loads the state a previous coordinator left at state_path, if any: the
  // same generation, members, epoch, finished workers' results, restarts
  // and generation records, with every member's heartbeat clock restarted
  // (a regroup in progress is not kept: its members rejoin and start one
  // again). FAILED_PRECONDITION when the
  // state belongs to another job (or a PS job: not restartable yet),
  // DATA_LOSS when it cannot be parsed. Call before serving.
  absl::Status Restore();
  ~JobTracker();
  JobTracker(const JobTracker&) = delete;
  JobTracker& operator=(const JobTracker&) = delete;

  // Blocks until this worker's round completes, then returns its place. A
  // member of the current generation g asking again gets the same place,
  // unless it leaves g (leaving_generation == g): then it joins the round
  // for g+1, opening one (a failure) if no regroup is under way. A new
  // worker joining a RUNNING all-reduce job opens a growth regroup.
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

  // PS mode: a shard registers (a retry gets the same index; with
  // checkpoints, a replacement gets a dead shard's), heartbeats, and
  // workers ask for the partition map. In ALLREDUCE mode these fail with
  // FAILED_PRECONDITION.
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
  // The regroup in progress: the current generation is over and the round
  // for the next one is forming.
  struct Regroup {
    bool failure = false;  // else growth (no restart used)
    std::string what;      // "worker rank 1 (host h, pid 7) missed ..."
    Clock::time_point started;
    absl::Time started_wall;
    double silent_s = 0;  // of the first member declared dead in it
    // Opened by a member whose collectives failed: the cause is not known
    // yet, and the first member declared dead replaces `what`.
    bool by_leave = false;
    // No restart was left when it opened: the job fails once the cause is
    // known (or the heartbeat bound has passed), naming it.
    bool over_budget = false;
    // "failure: <what>" or "growth: <what>": the status and record cause.
    std::string Cause() const;
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
    // During a regroup: it joined the round (waits in Join, no heartbeats
    // expected), or it was declared dead (out of the round's expectations).
    bool rejoined = false;
    bool dead = false;
    // Straggler detection (UpdateStraggler).
    int64_t last_step = 0;
    int64_t slow_steps = 0;  // consecutive steps above the threshold
    double busy_s = 0;       // own time per step, last window
    double busy_vs_median = 0;
    bool straggler = false;
  };

  // A registered parameter-server shard (the process now serving its
  // index).
  struct Shard {
    RegisterShardRequest request;
    Clock::time_point last_seen;
    ShardStats stats;
    bool knows_end = false;
    // With checkpoints: it missed heartbeats at `died` and the job waits
    // for a replacement; a replacement that has not heartbeat yet (it is
    // restoring); how many replacements this index has had.
    bool dead = false;
    Clock::time_point died;
    bool restoring = false;
    int restarts = 0;
  };

  // The job's shape, from its spec.
  bool PsMode() const { return job_.mode() == PS; }
  int NumShards() const {
    return PsMode() ? std::max(1, job_.ps().shards()) : 0;
  }
  // Rounds complete only once every shard has registered.
  bool ShardsReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(shards_.size()) >= NumShards();
  }
  // Whether a dead shard waits for a replacement instead of failing the job.
  bool ShardsRestart() const {
    return PsMode() && !job_.checkpoint().dir().empty();
  }
  int MinWorkers() const { return job_.cluster().min_workers(); }
  int MaxWorkers() const { return job_.cluster().max_workers(); }
  // Elastic recovery applies (and costs restarts) in all-reduce jobs;
  // growth needs a budget, so max_restarts 0 keeps today's fixed world.
  bool Elastic() const { return !PsMode(); }
  bool CanGrow() const {
    return Elastic() && job_.cluster().max_restarts() > 0;
  }

  // The member functions are defined across one file per responsibility:
  //   job_tracker.cc              life cycle: construction, the watchdog
  //                               thread, BeginEpoch, Finish, Stop, End,
  //                               Shutdown, WaitForEnd; request fencing
  //   job_tracker_rendezvous.cc   Join, the forming round, ranks
  //   job_tracker_regroup.cc      elastic recovery, generation records
  //   job_tracker_heartbeats.cc   worker heartbeats, stragglers
  //   job_tracker_shards.cc       parameter-server shards, partition plan
  //   job_tracker_persistence.cc  Persist, Restore
  //   job_tracker_views.cc        Status, Metrics, ReportJson
  // Helpers they share are in job_tracker_internal.h.

  // --- job_tracker.cc: life cycle and fencing.
  // The member a Heartbeat or Finish request (`request_name`) comes from.
  absl::StatusOr<Member*> FindCaller(absl::string_view request_name,
                                     uint64_t generation,
                                     const std::string& worker_id, int32_t rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED_PRECONDITION for a request naming generation `got`, not the
  // current one.
  absl::Status WrongGeneration(uint64_t got) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void End(JobState state, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WatchdogLoop();
  // Whether a worker that has not heard the end was seen since `since`.
  bool SomeoneListening(Clock::time_point since) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllKnowEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- job_tracker_rendezvous.cc: Join and the forming round.
  absl::Status CheckCanJoin(const JoinRequest& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts and logs a worker refused because the job is full (`why`).
  void NoteRefused(const JoinRequest& r, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AwaitRoomForReplacement(const std::function<bool()>& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rate limit for Join (a token bucket); UNAVAILABLE when empty.
  absl::Status TakeJoinToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  // Whether the forming round may complete now (first round or regroup).
  bool RoundReady(Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<int> AssignRanks() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JoinResponse Assignment(const Member& m) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- job_tracker_regroup.cc: elastic recovery.
  // Whether `r` from member `m` of the current generation leaves it (a
  // rejoin) rather than retrying its first Join.
  bool Rejoins(const JoinRequest& r, const Member& m) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Member `m` joins the round for the next generation, opening a failure
  // regroup if none is under way; an error when that ended the job.
  absl::Status Rejoin(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens a regroup of the current generation (no restart counted here).
  void StartRegroup(bool failure, std::string what, double silent_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A failure of the current generation (`what` says which): opens a
  // failure regroup or turns a growth one into one, using a restart; ends
  // the job FAILED when none is left. Several failures during one regroup
  // count once. Returns false when the job ended.
  bool Failure(const std::string& what, double silent_s, bool by_leave = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Failure() during a failure regroup: no restart is used; returns false
  // when the job ended.
  bool FailureInRecovery(const std::string& what, double silent_s,
                         bool by_leave) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Failure() during a growth regroup: it becomes a failure regroup.
  void GrowthBecomesFailure(const std::string& what, double silent_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the job after an over-budget regroup, naming its cause.
  void FailOverBudget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Member `m` is gone (`what`): in PS mode the job fails, in all-reduce
  // mode it is dropped and Failure() decides. Returns false when the job
  // ended.
  bool MemberLost(Member& m, const std::string& what, double silent_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Members of the current generation a regroup still waits for: neither
  // rejoined, dead nor finished.
  int Awaited() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RegroupReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Watchdog: completes a ready regroup, or at its deadline drops the
  // members that did not rejoin and completes it, or fails the job.
  void CheckRegroup(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ABORTED for a request of generation g (`what`) during a regroup.
  absl::Status RegroupAborted(absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends the record of the generation just formed (keeps the last
  // kMaxRecords).
  void RecordGeneration(int64_t previous_step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills the current generation's record from a heartbeat's progress.
  void NoteProgress(const WorkerProgress& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- job_tracker_heartbeats.cc: worker liveness and stragglers.
  void CheckHeartbeats() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every live worker (two or more) is silent past `limit` but
  // within coordinator_grace_ms of the newest heartbeat, on a durable
  // coordinator: then nobody is declared dead yet, and those silent since
  // keep that grace after others are heard again (outage_until_).
  bool AllSilentWithinGrace(Clock::time_point now, Clock::duration limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After `m`'s heartbeat: compares its own step time with the median of
  // the other live workers' and counts the steps it stays above
  // kStragglerRatio; kStragglerSteps of them make it a straggler.
  void UpdateStraggler(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> Stragglers() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // --- job_tracker_shards.cc: parameter-server shards.
  absl::Status RequirePsMode(absl::string_view what) const;
  // RegisterShard once every index is taken: `request` takes a dead
  // shard's index, or is refused.
  absl::StatusOr<RegisterShardResponse> ReplaceShard(
      const RegisterShardRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RegisterShard while indexes are free: `request` takes the next one.
  RegisterShardResponse AddShard(const RegisterShardRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer to shard `index`'s registration.
  RegisterShardResponse ShardAssignment(int index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SYNC: ShardHeartbeatResponse.workers_clock (0 in other modes).
  int64_t WorkersClock() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The shard branch of CheckHeartbeats; false when the job ended.
  bool CheckShardHeartbeats(Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- job_tracker_persistence.cc: the durable state.
  // Writes the durable state (after each change of it); failures are
  // logged, since the job itself can go on.
  void Persist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restore's members of `st`, each with `now` as its last heartbeat
  // (moved by the coordinator's grace period).
  absl::Status RestoreMembers(const CoordinatorState& st, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- job_tracker_views.cc: status and metrics.
  WorkerStatus Describe(const Member& m, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<WorkerStatus> Workers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ShardStatus DescribeShard(int index, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobSpec job_;
  const std::string state_path_;  // empty: not durable
  const Clock::time_point started_;
  // Tells this run's shard checkpoints from an earlier run's.
  const std::string run_id_;
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
  // Elastic recovery: the regroup under way, generations opened after a
  // failure, and a record per generation (the last kMaxRecords).
  static constexpr size_t kMaxRecords = 100;
  std::optional<Regroup> regroup_ ABSL_GUARDED_BY(mu_);
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<GenerationRecord> generations_ ABSL_GUARDED_BY(mu_);
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
  // The all-silent wait (AllSilentWithinGrace) has been logged.
  bool all_silent_logged_ ABSL_GUARDED_BY(mu_) = false;
  // Workers refused because the job had its maximum, and the last reason.
  int64_t refused_workers_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_refusal_ ABSL_GUARDED_BY(mu_);
  // The last outage in which every worker fell silent: the newest heartbeat
  // before it, and the end of its grace. Workers silent since then are not
  // declared dead before that end, even once others are heard again.
  Clock::time_point outage_newest_ ABSL_GUARDED_BY(mu_);
  Clock::time_point outage_until_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace cohort

#endif  // COHORT_SERVER_JOB_TRACKER_H_
