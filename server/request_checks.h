// Range checks for the coordinator's inputs: the ClusterSpec of the job and
// every field of every RPC request (proto/coordinator.proto).
//
// Each check returns INVALID_ARGUMENT with one sentence naming the field and
// the bad value (a Join of another protocol version is FAILED_PRECONDITION).
// Checks that need the job's state (generation, world size) live in
// JobTracker. All functions are pure and thread-safe.
#ifndef COHORT_SERVER_REQUEST_CHECKS_H_
#define COHORT_SERVER_REQUEST_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"

namespace cohort {

inline constexpr int kMaxIdBytes = 256;  // worker_id, host, model
inline constexpr int kMaxReplicas = 1024;
inline constexpr int kMaxKeyBytes = 1024;
inline constexpr int64_t kMaxValueBytes = int64_t{64} << 20;
inline constexpr int kMaxWaitKeys = 1024;
inline constexpr int64_t kMaxWaitTimeoutMs = 600000;
inline constexpr int kMaxTextBytes = 64 << 10;  // errors and stop reasons
inline constexpr int kMaxParamTensors = 1 << 20;
inline constexpr int64_t kMaxParamElements = int64_t{1} << 36;  // 256 GiB

// Checks a ClusterSpec after FillClusterDefaults (common/spec.h); messages
// name the field as "job.cluster.<field>".
absl::Status CheckClusterSpec(const ClusterSpec& cluster);

absl::Status CheckJoinRequest(const JoinRequest& request);
absl::Status CheckHeartbeatRequest(const HeartbeatRequest& request);
absl::Status CheckKvSetRequest(const KvSetRequest& request);
absl::Status CheckKvGetRequest(const KvGetRequest& request);
absl::Status CheckKvWaitRequest(const KvWaitRequest& request);
absl::Status CheckKvAddRequest(const KvAddRequest& request);
absl::Status CheckBeginEpochRequest(const BeginEpochRequest& request);
absl::Status CheckFinishRequest(const FinishRequest& request);
absl::Status CheckStopRequest(const StopRequest& request);
absl::Status CheckRegisterShardRequest(const RegisterShardRequest& request);
absl::Status CheckShardHeartbeatRequest(const ShardHeartbeatRequest& request);
absl::Status CheckPlanPartitionsRequest(const PlanPartitionsRequest& request);

// FAILED_PRECONDITION when a worker or shard (`what`) that reached the
// coordinator from another host (`grpc_peer`, as grpc::ServerContext::peer
// gives it) advertises a loopback `address`: its peers would dial
// themselves. A process on the coordinator's own loopback may.
absl::Status CheckAdvertisedAddress(absl::string_view what,
                                    absl::string_view address,
                                    absl::string_view grpc_peer);

// "rank" must lie in [0, world_size); `field` names it in the message.
absl::Status CheckRank(absl::string_view field, int32_t rank, int world_size);

// FAILED_PRECONDITION for a request of generation `got` when `current` is
// the job's (0: no generation has formed yet).
absl::Status StaleGeneration(uint64_t got, uint64_t current);

// A user-supplied string made safe and short enough for a message: quoted,
// non-printable bytes escaped, cut after 64 bytes.
std::string QuoteForMessage(absl::string_view s);

}  // namespace cohort

#endif  // COHORT_SERVER_REQUEST_CHECKS_H_
