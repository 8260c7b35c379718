// Parameter-server mode's gradient exchange: the mean gradient over the
// local replicas taking part goes to the shards while backward runs, and
// the parameters come back from them; the shards run the optimizer.
//
// Ownership: borrows the replicas' gradient buffers, the parameter buffer
// every local replica shares, and the PsLink (owned by the worker
// process). Thread safety: as GradientExchange.
#ifndef COHORT_WORKER_EXCHANGE_PS_EXCHANGE_H_
#define COHORT_WORKER_EXCHANGE_PS_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"
#include "worker/exchange/gradient_exchange.h"
#include "worker/exchange/ps_connect.h"

namespace cohort {

// A worker's connection to the shards and what it moved over the run.
struct PsLink {
  std::unique_ptr<PsClient> client;
  PsClient::Stats totals{};
  // Adds what the client moved since the last call to `totals`; returns
  // the bytes.
  int64_t TakeBytes();
};

class PsExchange : public GradientExchange {
 public:
  PsExchange(std::vector<float*> replica_grads, int64_t count, float* params,
             PsConnect connect);

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

 private:
  // The client names the shard; the clock tells how far training got.
  absl::Status WithClock(const absl::Status& s, int64_t clock);

  const std::vector<float*> grads_;
  const int64_t count_;
  float* const params_;
  const PsConnect connect_;
  PsLink* link_ = nullptr;
  int64_t clock_ = 0;  // of the push in flight
  int64_t bytes_ = 0;  // since TakeStats
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
