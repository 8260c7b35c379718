// Parameter-server mode's gradient exchange: the mean gradient over the
// local replicas taking part goes to the shards while backward runs, and
// the parameters come back from them; the shards run the optimizer.
//
// Sparse tables (EmbeddingBagSpec.sparse) live on the shards: the exchange
// is the tables' RowFetcher, pulling the rows a batch touches for the step
// being computed, and each push carries the rows' gradients, averaged over
// the replicas taking part like the dense ones.
//
// Ownership: borrows the replicas' gradient buffers, the parameter buffer
// every local replica shares, the replicas' sparse tables and the PsLink
// (owned by the worker process). Thread safety: as GradientExchange; Fetch
// may be called from every replica's thread at once during Forward.
#ifndef COHORT_WORKER_EXCHANGE_PS_EXCHANGE_H_
#define COHORT_WORKER_EXCHANGE_PS_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/ps_client.h"
#include "proto/ps.pb.h"
#include "worker/exchange/gradient_exchange.h"
#include "worker/exchange/ps_connect.h"
#include "worker/layers/sparse_table.h"

namespace cohort {

// A worker's connection to the shards and what it moved over the run.
struct PsLink {
  std::unique_ptr<PsClient> client;
  PsClient::Stats totals{};
  // Adds what the client moved since the last call to `totals`; returns
  // the bytes.
  int64_t TakeBytes();
};

class PsExchange : public GradientExchange, public RowFetcher {
 public:
  // `replica_tables[r]`: local replica r's sparse tables, the same tables in
  // the same order in every replica (table k has id k), described by
  // `tables` as the shards' Init takes them. Both empty for a model
  // without sparse tables.
  PsExchange(std::vector<float*> replica_grads, int64_t count, float* params,
             PsConnect connect,
             std::vector<std::vector<SparseTable*>> replica_tables = {},
             std::vector<SparseTableInfo> tables = {});

  bool UpdatesLocally() const override { return false; }
  bool CombinesLocalReplicas() const override { return true; }
  absl::Status Setup(const std::vector<int64_t>& param_sizes) override;
  void BeginStep(const ExchangeStep& step) override;
  void RangeReady(int replica, int64_t offset) override;
  absl::Status Finish() override;
  const char* finish_name() const override { return "push"; }
  bool finish_on_bucket_lane() const override { return true; }
  absl::Status Pull(int64_t clock) override;
  ExchangeStats TakeStats() override;

  // The rows for the step being computed: BeginStep's clock, or, outside a
  // step (evaluation), the last Pull's.
  absl::Status Fetch(absl::Span<const RowRequest> requests) override;

 private:
  // Per table, the `active` replicas' rows and gradients in replica order,
  // each row's gradients summed in that order and averaged.
  std::vector<PsRows> StepRows(int active) const;
  // The client names the shard; the clock tells how far training got.
  absl::Status WithClock(const absl::Status& s, int64_t clock);

  const std::vector<float*> grads_;
  const int64_t count_;
  float* const params_;
  const PsConnect connect_;
  PsLink* link_ = nullptr;
  int64_t clock_ = 0;  // of the push in flight
  int64_t bytes_ = 0;  // since TakeStats
  const std::vector<std::vector<SparseTable*>> replica_tables_;
  const std::vector<SparseTableInfo> tables_;
  std::atomic<int64_t> fetch_clock_{0};
  // How far each local replica's backward has come in this step, the
  // replicas taking part, and from where replica 0's buffer holds their
  // mean (and is final, handed to the client).
  absl::Mutex mu_;
  std::vector<int64_t> ready_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t final_from_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_EXCHANGE_PS_EXCHANGE_H_
