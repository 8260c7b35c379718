// A worker's connection to the parameter-server shards (proto/ps.proto).
//
// The model's parameters are one flat float buffer split into partitions
// (common/partition.h); each shard holds some of them. Push sends the
// gradient of each shard's partitions, Pull fetches its parameters, to all
// shards in parallel, in chunks of at most kMaxChunkBytes. Every RPC has a
// deadline; UNAVAILABLE (a shard restarting, a dropped connection) is
// retried with backoff within it, a push with the same seq so the shard
// applies it once. Errors name the shard: "push to shard 1 at HOST:PORT:
// UNAVAILABLE: ...".
//
// Thread safety: thread-compatible; one thread calls a PsClient at a time
// (it starts its own threads for the shards of each call).
#ifndef COHORT_WORKER_PS_CLIENT_H_
#define COHORT_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace cohort {

struct PsClientOptions {
  std::vector<std::string> shard_addresses;  // by shard index
  std::vector<Partition> partitions;         // all, ordered by id
  std::string worker_id;
  int rank = 0;
  absl::Duration rpc_timeout = absl::Seconds(30);
};

class PsClient {
 public:
  // INVALID_ARGUMENT for no shards or a partition naming a shard that does
  // not exist. Does not connect yet.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(
      const PsClientOptions& options);
  ~PsClient();

  // Rank 0, once: every shard's partitions and initial values from the flat
  // buffer `params`.
  absl::Status Init(const float* params, int world_size, int total_replicas);

  // The flat whole-model gradient of step `clock`, with that step's `lr`
  // and SYNC averaging `weight` (this worker's replicas).
  absl::Status Push(const float* grads, int64_t clock, double lr, int weight);

  // The parameters for step `clock` into the flat buffer `params` (each
  // shard's partitions; after the shard's consistency wait).
  absl::Status Pull(int64_t clock, float* params);

  struct Stats {
    int64_t bytes_pushed = 0, bytes_pulled = 0;
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
  explicit PsClient(const PsClientOptions& options);
  // Runs fn(shard) for every shard, in parallel; the first error.
  template <typename Fn>
  absl::Status ForEachShard(const Fn& fn);
  absl::Status InitShard(Shard& s, const float* params, int world_size,
                         int total_replicas);
  absl::Status PushShard(Shard& s, const float* grads, int64_t clock, double lr,
                         int weight, uint64_t seq);
  absl::Status PullShard(Shard& s, int64_t clock, float* params);

  PsClientOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  uint64_t seq_ = 0;
  Stats stats_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_PS_CLIENT_H_
