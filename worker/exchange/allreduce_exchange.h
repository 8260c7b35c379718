// All-reduce of every replica's gradient over a multi-worker job while
// backward is still running (CPU replicas, Gloo).
//
// Each local replica reports how far its backward has come (RangeReady);
// once every local replica has passed a point, the finished range is summed
// into replica 0's buffer and handed to the BucketReducer, whose thread
// all-reduces it across workers while backward goes on. Finish() waits for
// the last bucket; replica 0's buffer then holds the mean gradient over all
// replicas of the job.
//
// Ownership: borrows the gradient buffers, the communicator and the
// timeline. Thread safety: as GradientExchange.
#ifndef COHORT_WORKER_EXCHANGE_ALLREDUCE_EXCHANGE_H_
#define COHORT_WORKER_EXCHANGE_ALLREDUCE_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "worker/comm/bucket_codec.h"
#include "worker/comm/bucket_reducer.h"
#include "worker/comm/communicator.h"
#include "worker/exchange/gradient_exchange.h"

namespace cohort {

class Timeline;

class AllReduceExchange : public GradientExchange {
 public:
  // `param_offsets`: where each parameter starts in the flat buffer; buckets
  // never split a parameter (see BucketReducer::SetBoundaries). `timeline`
  // (may be null) receives each bucket's all-reduce. `codec` (may be null:
  // floats) compresses the buckets (worker/exchange/compression.h).
  AllReduceExchange(std::vector<float*> replica_grads, int64_t count,
                    int total_replicas, Communicator* comm,
                    int64_t bucket_bytes, std::vector<int64_t> param_offsets,
                    Timeline* timeline,
                    std::unique_ptr<BucketCodec> codec = nullptr);
  // Destroys the reducer, which may still run the codec, first.
  ~AllReduceExchange() override;

  bool UpdatesLocally() const override { return true; }
  bool CombinesLocalReplicas() const override { return true; }
  void BeginStep(const ExchangeStep& step) override;
  void RangeReady(int replica, int64_t offset) override;
  absl::Status Finish() override { return reducer_.Finish(); }
  ExchangeStats TakeStats() override;
  bool CarriesState() const override {
    return codec_ != nullptr && codec_->CarriesState();
  }
  std::vector<float> SaveState() const override;
  absl::Status LoadState(std::vector<float> state) override;

 private:
  const std::vector<float*> grads_;
  const int64_t count_;
  const int total_replicas_;
  std::unique_ptr<BucketCodec> codec_;
  BucketReducer reducer_;
  absl::Mutex mu_;
  std::vector<int64_t> ready_ ABSL_GUARDED_BY(mu_);  // per local replica
  int64_t reduced_from_ ABSL_GUARDED_BY(mu_) = 0;    // summed locally
};

}  // namespace cohort

#endif  // COHORT_WORKER_EXCHANGE_ALLREDUCE_EXCHANGE_H_
