// A worker's connection to the parameter-server shards (proto/ps.proto).
//
// The model's parameters are one flat float buffer split into partitions
// (common/partition.h); each shard holds some of them. Push sends the
// gradient of each shard's partitions, Pull fetches its parameters, to all
// shards in parallel, in chunks of at most kMaxChunkBytes. Every RPC has a
// deadline and retries UNAVAILABLE as client/ps_shard.h says; a push is
// retried with the same seq, so that the shard applies it once (or again,
// if the one it applied was lost with a crash: the restored shard's seq
// table tells). Errors name the shard: "push to shard 1 at HOST:PORT:
// UNAVAILABLE: ...". A call that got through after retries logs how long
// the shard was away.
//
// A push can overlap the backward pass that produces it: BeginPush opens
// the streams, MarkReady says how much of the gradient is final (backward
// finishes the last parameters first), each shard's stream sends a
// partition as soon as all of it is final, and FinishPush waits for the
// acknowledgements.
//
// Sparse tables (EmbeddingBagSpec.sparse, PsClientOptions.tables) live on
// the shards row by row: PullRows fetches the rows a batch touches from
// their owners, and SetPushRows adds the step's row gradients to the push
// in flight, after each shard's dense chunks. With tables every shard takes
// part in every Init, push and pull, partitions or none: a SYNC shard
// advances only once every rank pushed to it.
//
// Thread safety: one thread calls Init, Pull, Push, BeginPush, SetPushRows,
// FinishPush and TakeStats, one at a time; MarkReady may be called from any
// thread between BeginPush and FinishPush, and PullRows from any number of
// threads at any time (during a push too). The client owns one thread per
// shard, started by Create and joined by the destructor, which runs that
// shard's part of Init, pushes and pulls; PullRows runs on its callers'
// threads instead, since a shard's thread may be waiting for backward.
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
#include "absl/types/span.h"
#include "client/ps_rows.h"
#include "common/security.h"
#include "proto/coordinator.pb.h"
#include "proto/ps.pb.h"

namespace cohort {

class PsShard;       // client/ps_shard.h
class ShardThreads;  // client/shard_threads.h

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
  // The model's sparse tables, ids 0, 1, ... in order (every worker's
  // client needs them: with any, every shard takes part in every call).
  std::vector<SparseTableInfo> tables;
  // How pushed gradients travel (JobSpec.compression FP16 or BF16: half
  // the bytes; FP16 saturates at +-65504). Parameters travel as float32.
  TensorChunk::Encoding push_encoding = TensorChunk::FLOAT32;
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
  // not exist, malformed tables, or an unreadable token or TLS file. Does
  // not connect yet.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(
      const PsClientOptions& options);
  ~PsClient();

  // Rank 0, once: every shard's partitions and initial values from the flat
  // buffer `params`, and the sparse tables.
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
  // The rows of the sparse tables that this push carries (unique ids per
  // table, their gradients averaged like the dense ones), between BeginPush
  // and FinishPush: each shard gets its own rows after its dense chunks (a
  // shard without partitions opens its stream now). INVALID_ARGUMENT naming
  // the table and row for rows outside their table; the push then carries
  // none.
  absl::Status SetPushRows(const std::vector<PsRows>& rows);
  // Marks everything final (the push carries no rows unless SetPushRows
  // said so) and waits for every shard; the first error.
  absl::Status FinishPush();

  // The parameters for step `clock` into the flat buffer `params` (each
  // shard's partitions; after the shard's consistency wait).
  absl::Status Pull(int64_t clock, float* params);

  // The rows `requests` name, for step `clock` (after the wait Pull
  // makes), into their values: from every owning shard in parallel, in
  // calls under the message size limit. INVALID_ARGUMENT naming the table
  // and row for a row outside its table; otherwise errors name the shard:
  // "pull rows from shard 1 at HOST:PORT: ...". Thread-safe.
  absl::Status PullRows(int64_t clock, absl::Span<const PsRowRequest> requests);

  struct Stats {
    int64_t bytes_pushed = 0, bytes_pulled = 0;
    // Rows of sparse tables moved: gradients pushed, values pulled.
    int64_t rows_pushed = 0, rows_pulled = 0;
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
  explicit PsClient(const PsClientOptions& options);
  // Which shards take part in Init, pushes and pulls: those with
  // partitions, and with sparse tables all.
  std::vector<bool> Busy() const;
  // Runs fn(shard) for every busy shard on its thread; the first error.
  absl::Status ForEachShard(const std::function<absl::Status(Shard&)>& fn);
  static absl::Status FirstError(const std::vector<absl::Status>& results);
  absl::Status InitShard(Shard& s, const float* params, int world_size,
                         int total_replicas);
  absl::Status PushShard(Shard& s);
  // Writes the header and the shard's dense chunks, then, with tables, its
  // rows once SetPushRows or FinishPush has set them.
  bool WritePush(Shard& s, const std::vector<const Partition*>& order,
                 grpc::ClientWriterInterface<PushRequest>* writer,
                 int64_t* bytes);
  // Blocks until grads[offset, end) of the current push is final.
  void AwaitReady(int64_t offset);
  // Blocks until the current push's rows are set; the shard's.
  const std::vector<PsRows>& AwaitRows(int shard);
  absl::Status PullShard(Shard& s, int64_t clock, float* params);
  // One shard's part of PullRows; adds the rows and bytes it got.
  absl::Status PullRowsShard(PsShard& shard, int64_t clock,
                             std::vector<RowsPullCall>& calls, int64_t* rows,
                             int64_t* bytes);

  PsClientOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::unique_ptr<ShardThreads> threads_;  // one per shard
  // The push in flight (BeginPush to FinishPush).
  const float* push_grads_ = nullptr;
  PsPush push_;
  uint64_t push_seq_ = 0;
  absl::Mutex ready_mu_;
  int64_t ready_from_ ABSL_GUARDED_BY(ready_mu_) = 0;
  // Whether the push's rows are known; once they are, push_rows_ (by
  // shard) stays unchanged until FinishPush returns.
  bool rows_set_ ABSL_GUARDED_BY(ready_mu_) = false;
  std::vector<std::vector<PsRows>> push_rows_;
  uint64_t seq_ = 0;
  absl::Mutex stats_mu_;
  Stats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace cohort

#endif  // COHORT_CLIENT_PS_CLIENT_H_
