// The parameter-server shard's gRPC service (proto/ps.proto) over a
// ShardState: Init and Push stream chunks (and a push's sparse rows) in and
// are staged, validated and only then applied; Pull waits as the
// consistency model says, takes the parameters under the lock and streams
// them after; PullRows waits the same, copies the rows asked for and
// streams them in chunks of at most kMaxChunkBytes.
//
// With checkpoints (the job's checkpoint.dir), it also owns the thread that
// writes the shard's checkpoints (shard_checkpoint.h).
//
// Ownership: ShardServer owns the gRPC server, the service, the state and
// the checkpoint writer.
// Thread safety: all methods are thread-safe, except that Assign must not
// run concurrently with Shutdown; gRPC runs each RPC on its own thread (sync
// API), so a waiting pull blocks only itself.
#ifndef COHORT_SERVER_PS_SHARD_SERVER_H_
#define COHORT_SERVER_PS_SHARD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/security.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace cohort {

class ShardCheckpointer;
class ShardState;

struct ShardServerOptions {
  std::string listen = "127.0.0.1:0";
  JobSpec job;
  int shard_index = 0;
  // Job token and TLS (common/security.h): every method needs the token
  // when security.token_file is set.
  SecurityOptions security;
};

class ShardServer {
 public:
  // Binds and starts serving. UNAVAILABLE "cannot listen on HOST:PORT: ..."
  // when the address is in use; INVALID_ARGUMENT for a bad address or an
  // unreadable token or TLS file.
  static absl::StatusOr<std::unique_ptr<ShardServer>> Start(
      const ShardServerOptions& options);
  ~ShardServer();

  // host:port actually bound (the listen host, the chosen port).
  std::string address() const;
  int port() const { return port_; }

  // Sets the job and shard index learnt at registration (a shard process
  // must bind before it can register). FAILED_PRECONDITION after Init.
  absl::Status Configure(const JobSpec& job, int shard_index);

  // Configure from a registration's answer, and checkpoints when the job
  // has a checkpoint.dir: a fresh shard clears its directory
  // (<dir>/shard-<index>) of what an earlier run left there, a replacement
  // (assignment.restore) takes the newest checkpoint there that verifies
  // and matches the job's layout and run. Either then writes checkpoints.
  // Returns a line for the log. For a replacement without a usable
  // checkpoint: NOT_FOUND, DATA_LOSS or FAILED_PRECONDITION naming the
  // directory and why; the shard must not serve then.
  absl::StatusOr<std::string> Assign(const RegisterShardResponse& assignment);

  // A replacement in SYNC: every worker has pushed every step below `clock`
  // (ShardHeartbeatResponse.workers_clock); ShardState::RaiseSyncClocks.
  void RaiseSyncClocks(int64_t clock);

  // Statistics since start; rates over the window since the last call.
  ShardStats TakeStats();
  // The same without starting a new window (for /metrics).
  ShardStats Stats() const;

  // Fails waiting pulls with UNAVAILABLE, cancels in-flight RPCs and stops
  // serving. Idempotent.
  void Shutdown();

 private:
  class Service;
  ShardServer(const ShardServerOptions& options, std::string host,
              TokenCheck token_check);
  absl::Status Serve(const std::string& listen,
                     std::shared_ptr<grpc::ServerCredentials> credentials);

  std::string host_;
  int port_ = 0;
  std::unique_ptr<ShardState> state_;
  std::unique_ptr<ShardCheckpointer> checkpointer_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_SERVER_H_
