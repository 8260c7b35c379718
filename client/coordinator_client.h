// A worker's (or an operator's) connection to the coordinator.
//
// Join retries while the coordinator cannot be reached (it may still be
// starting, or its Service DNS name may not resolve yet) or is too busy to
// take it, with jittered exponential backoff, for a bounded time; then it
// fails naming the address. Every other
// call has a deadline. After Join, the client also serves as the KvClient
// that bootstraps Gloo (keys are scoped by the coordinator per generation).
// Heartbeats have a connection of their own (client/keepalive.h), opened by
// FollowHeartbeats.
//
// Thread safety: all methods may be called from any thread (the gRPC stubs
// are thread-safe; the joined state is set once by Join, and the deadlines
// by FollowHeartbeats, before other calls; until the first Join or
// RegisterShard succeeds, which must run alone, they may replace the
// channel).
#ifndef COHORT_CLIENT_COORDINATOR_CLIENT_H_
#define COHORT_CLIENT_COORDINATOR_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "common/security.h"
#include "proto/coordinator.grpc.pb.h"

namespace cohort {

class CoordinatorClient : public KvClient {
 public:
  // Does not connect yet (gRPC connects lazily). InvalidArgument for an
  // address that is not HOST:PORT, or an unreadable token or TLS file.
  // `security`: the job token to send and TLS (common/security.h).
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Create(
      const std::string& address, const SecurityOptions& security = {});

  const std::string& address() const { return address_; }

  // Joins the job; retries UNAVAILABLE, and a coordinator's refusal for
  // being busy with other clients' blocking calls (RESOURCE_EXHAUSTED,
  // client/busy_refusal.h), for up to `connect_timeout`. Other refusals (job
  // full, wrong protocol, bad fields) come back at once.
  absl::StatusOr<JoinResponse> Join(const JoinRequest& request,
                                    absl::Duration connect_timeout);

  // How long BeginEpoch, Finish and PlanPartitions keep retrying while the
  // coordinator is unreachable (a durable coordinator restarting). Default
  // zero: they fail at once.
  void set_retry_window(absl::Duration window) { retry_window_ = window; }

  // Per-attempt deadlines from the job's heartbeat settings (default 10 s
  // each): a heartbeat gets its interval (200 ms to 10 s), and the other
  // short calls (BeginEpoch, Finish, PlanPartitions, KV) two heartbeat
  // bounds (2 to 10 s), so that a cut link is noticed within the heartbeat
  // bound rather than after a fixed 10 s. Also opens the heartbeats'
  // connection, made for their interval (kept when the interval is the
  // same as before).
  void FollowHeartbeats(const ClusterSpec& cluster);

  // Heartbeat and ShardHeartbeat wait for their connection, up to their
  // deadline, rather than failing while it is down: the first heartbeat
  // after a partition heals goes out as soon as it reconnects.
  absl::StatusOr<HeartbeatResponse> Heartbeat(const WorkerProgress& progress);
  // `retry`: retry an unreachable coordinator for the retry window; false:
  // one attempt, no longer than a heartbeat.
  absl::StatusOr<uint64_t> BeginEpoch(int64_t epoch, bool retry = true);
  absl::Status Finish(bool ok, const std::string& error,
                      const WorkerResult& result);

  // PS mode, workers: the partition map for this model's parameter sizes.
  absl::StatusOr<PlanPartitionsResponse> PlanPartitions(
      const std::vector<int64_t>& param_sizes);

  // PS mode, shards: registers (retrying UNAVAILABLE for up to
  // `connect_timeout`, as Join does), then heartbeats with statistics.
  absl::StatusOr<RegisterShardResponse> RegisterShard(
      const RegisterShardRequest& request, absl::Duration connect_timeout);
  // `failure`: the shard cannot serve, and the job fails with this reason.
  absl::StatusOr<ShardHeartbeatResponse> ShardHeartbeat(
      const ShardStats& stats, const std::string& failure = "");

  // Operator calls; `timeout` bounds the whole call.
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration timeout);
  absl::StatusOr<MetricsResponse> GetMetrics(absl::Duration timeout);
  absl::Status Stop(const std::string& reason, absl::Duration timeout);

  // KvClient, scoped to the joined generation.
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::optional<std::string>> Get(
      const std::string& key) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;

 private:
  CoordinatorClient(std::string address, const SecurityOptions& security,
                    std::shared_ptr<grpc::Channel> channel);
  absl::Status FromGrpc(const grpc::Status& s, const char* what) const;
  // Runs `call` (returning grpc::Status) until it succeeds, fails with
  // anything but UNAVAILABLE or DEADLINE_EXCEEDED (or RESOURCE_EXHAUSTED
  // that `busy_refusal`, if given, says is the server being busy), or
  // `connect_timeout` has passed; with jittered exponential backoff between
  // attempts.
  template <typename Call>
  absl::Status RetryWhileUnavailable(
      absl::Duration connect_timeout, const char* what, const Call& call,
      const std::function<bool()>& busy_refusal = nullptr);
  // The error for the last failed attempt `s` of a retried call.
  absl::Status GaveUp(const grpc::Status& s, const char* what, int attempts,
                      absl::Duration connect_timeout, bool busy) const;
  // Waits until the channel stops connecting (ready, or failed with a
  // reason a call reports); false if it is still connecting at `deadline`.
  bool ConnectingEndsBy(absl::Time deadline);
  // Replaces a channel that failed to connect with a fresh one, until the
  // first Join or RegisterShard succeeds: no other call runs before, and
  // it swaps the stub.
  void RenewFailedChannel();
  // The heartbeats' stub: their own connection once FollowHeartbeats made
  // it, else the main one.
  std::shared_ptr<Coordinator::Stub> HeartbeatStub();

  const std::string address_;
  // File names: for error hints, and read again for the heartbeats'
  // connection.
  const SecurityOptions security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<Coordinator::Stub> stub_;
  absl::Mutex heartbeat_mu_;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(heartbeat_mu_);
  std::shared_ptr<Coordinator::Stub> heartbeat_stub_
      ABSL_GUARDED_BY(heartbeat_mu_);
  absl::Duration retry_window_ = absl::ZeroDuration();
  absl::Duration heartbeat_deadline_ = absl::Seconds(10);
  absl::Duration call_deadline_ = absl::Seconds(10);
  // Set by Join.
  uint64_t generation_ = 0;
  std::string worker_id_;
  int rank_ = -1;
  // Set by RegisterShard.
  std::string shard_id_;
  int shard_index_ = -1;
};

}  // namespace cohort

#endif  // COHORT_CLIENT_COORDINATOR_CLIENT_H_
