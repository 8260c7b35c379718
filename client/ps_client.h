// A worker's connection to the parameter-server shards (proto/ps.proto).
//
// The model's parameters are one flat float buffer split into partitions
// (common/partition.h); each shard holds some of them. Push sends the
// gradient of each shard's partitions, Pull fetches its parameters, to all
// shards in parallel, in chunks of at most kMaxChunkBytes. Every RPC has a
// deadline (rpc_timeout); UNAVAILABLE (a shard restarting, a dropped
// connection) is retried with exponential backoff (100 ms doubling to 2 s)
// for up to rpc_timeout plus the restart window, each attempt with its own
// deadline, the shard's address re-read between attempts (a replacement
// shard may serve elsewhere), and a push with the same seq, so that the
// shard applies it once (or again, if the one it applied was lost with a
// crash: the restored shard's seq table tells). Other errors fail at once.
// Errors name the shard: "push to shard 1 at HOST:PORT: UNAVAILABLE: ...".
// A call that got through after retries logs how long the shard was away.
//
// A push can overlap the backward pass that produces it: BeginPush opens
// the streams, MarkReady says how much of the gradient is final (backward
// finishes the last parameters first), each shard's stream sends a
// partition as soon as all of it is final, and FinishPush waits for the
// acknowledgements.
//
// Thread safety: one thread calls Init, Pull, Push, BeginPush and
// FinishPush, one at a time; MarkReady may be called from any thread
// between BeginPush and FinishPush. The client owns one thread per shard,
// started by Create and joined by the destructor, which runs that shard's
// RPCs.
#ifndef COHORT_CLIENT_PS_CLIENT_H_
#define COHORT_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "proto/coordinator.pb.h"

namespace grpc {
class Status;
}  // namespace grpc

namespace cohort {

struct PsClientOptions {
  std::vector<std::string> shard_addresses;  // by shard index
  std::vector<Partition> partitions;         // all, ordered by id
  std::string worker_id;
  int rank = 0;
  absl::Duration rpc_timeout = absl::Seconds(30);
  // How much longer than rpc_timeout a call retries UNAVAILABLE: as long as
  // a dead shard's replacement may take to serve (zero: no restarts, the
  // job fails when a shard dies; client/restart_window.h). A pull may
  // also wait this much longer on a shard for peers the restart stalls.
  absl::Duration restart_window = absl::ZeroDuration();
  // Where shard `index` serves now (the coordinator's view), asked between
  // retries; called from the client's shard threads, possibly at once.
  // Empty: addresses never change.
  std::function<absl::StatusOr<std::string>(int index)> shard_address;
  // The job token to send and TLS (common/security.h).
  SecurityOptions security;
};

// What a push carries besides the gradient.
struct PsPush {
  // SYNC: the step; SSP and ASYNC: the round (first_chunk / total replicas).
  int64_t clock = 0;
  double lr = 0;  // this step's learning rate
  // Local replicas whose mean gradient this is: SYNC's averaging weight,
  // and for SSP and ASYNC the number of data chunks.
  int weight = 1;
  // SSP and ASYNC: the data chunks the gradient was computed from are
  // [first_chunk, first_chunk + weight) (proto/ps.proto PushHeader).
  int64_t first_chunk = 0;
};

class PsClient {
 public:
  // INVALID_ARGUMENT for no shards, a partition naming a shard that does
  // not exist, or an unreadable token or TLS file. Does not connect yet.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(
      const PsClientOptions& options);
  ~PsClient();

  // Rank 0, once: every shard's partitions and initial values from the flat
  // buffer `params`.
  absl::Status Init(const float* params, int world_size, int total_replicas);

  // The flat whole-model gradient, described by `push`: BeginPush,
  // everything ready, FinishPush.
  absl::Status Push(const float* grads, const PsPush& push);

  // Starts pushing `grads` (the flat buffer, which must stay valid, and
  // unchanged where final, until FinishPush returns); nothing is final yet.
  // A shard's stream opens when its first partition is final, and its
  // deadline (rpc_timeout) runs from then.
  void BeginPush(const float* grads, const PsPush& push);
  // grads[from, end) is final. Offsets only decrease within a push.
  void MarkReady(int64_t from);
  // Marks everything final and waits for every shard; the first error.
  absl::Status FinishPush();

  // The parameters for step `clock` into the flat buffer `params` (each
  // shard's partitions; after the shard's consistency wait).
  absl::Status Pull(int64_t clock, float* params);

  struct Stats {
    int64_t bytes_pushed = 0, bytes_pulled = 0;
    // Time the caller waited: in Pull, and in FinishPush (what backward
    // did not hide).
    double push_seconds = 0, pull_seconds = 0;
    // The most updates any shard applied between the parameters a pushed
    // gradient was computed on and that push's acknowledgement (the push
    // itself included when applied at once).
    int64_t max_version_lag = 0;
  };
  // Since the last call.
  Stats TakeStats();

 private:
  struct Shard;
  class ShardThreads;
  explicit PsClient(const PsClientOptions& options);
  // Runs fn(shard) for every shard with partitions, in parallel; the first
  // error.
  absl::Status ForEachShard(const std::function<absl::Status(Shard&)>& fn);
  // Which shards have partitions (the others are skipped).
  std::vector<bool> Busy() const;
  static absl::Status FirstError(const std::vector<absl::Status>& results);
  // Runs `attempt(deadline)` on shard `s` until it succeeds, fails with
  // anything but UNAVAILABLE (or a failed TLS handshake, which would fail
  // again) or the retry window (rpc_timeout + restart_window from now)
  // closes. Each attempt's deadline is rpc_timeout + `wait` + `grace` from
  // its start, but no later than the window's end + `grace`.
  template <typename Attempt>
  grpc::Status Retry(Shard& s, absl::Duration wait, absl::Duration grace,
                     const Attempt& attempt);
  // Points `s` at its current address, if the coordinator knows another.
  void Readdress(Shard& s);
  absl::Status Connect(Shard& s, const std::string& address);
  absl::Status InitShard(Shard& s, const float* params, int world_size,
                         int total_replicas);
  absl::Status PushShard(Shard& s);
  // Blocks until grads[offset, end) of the current push is final.
  void AwaitReady(int64_t offset);
  absl::Status PullShard(Shard& s, int64_t clock, float* params);

  PsClientOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::unique_ptr<ShardThreads> threads_;  // one per shard
  // The push in flight (BeginPush to FinishPush).
  const float* push_grads_ = nullptr;
  PsPush push_;
  uint64_t push_seq_ = 0;
  absl::Mutex ready_mu_;
  int64_t ready_from_ ABSL_GUARDED_BY(ready_mu_) = 0;
  uint64_t seq_ = 0;
  Stats stats_;
};

}  // namespace cohort

#endif  // COHORT_CLIENT_PS_CLIENT_H_
