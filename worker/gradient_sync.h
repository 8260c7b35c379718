// Averages gradients over every replica of a multi-worker job while
// backward is still running.
//
// Each local replica reports how far its backward has come (Ready); once
// every local replica has passed a point, the finished range is summed into
// replica 0's buffer and handed to the BucketReducer, whose thread
// all-reduces it across workers while backward goes on. Finish() waits for
// the last bucket; replica 0's buffer then holds the mean gradient over all
// replicas of the job.
//
// Ownership: borrows the gradient buffers and the communicator. Thread
// safety: Ready() may be called from every replica thread concurrently;
// BeginStep/Finish from one thread, outside a step's backward.
#ifndef COHORT_WORKER_GRADIENT_SYNC_H_
#define COHORT_WORKER_GRADIENT_SYNC_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/bucket_reducer.h"
#include "worker/comm/communicator.h"

namespace cohort {

class GradientSync {
 public:
  // `param_offsets`: where each parameter starts in the flat buffer; buckets
  // never split a parameter (see BucketReducer::SetBoundaries).
  GradientSync(std::vector<float*> replica_grads, int64_t count,
               int total_replicas, Communicator* comm, int64_t bucket_bytes,
               std::vector<int64_t> param_offsets);

  void BeginStep();
  // Replica `replica`'s gradients at index >= offset are final.
  void Ready(int replica, int64_t offset);
  absl::Status Finish();
  BucketReducer::Stats TakeStats() { return reducer_.TakeStats(); }
  void set_observer(BucketReducer::Observer observer) {
    reducer_.set_observer(std::move(observer));
  }

 private:
  const std::vector<float*> grads_;
  const int64_t count_;
  const int total_replicas_;
  BucketReducer reducer_;
  absl::Mutex mu_;
  std::vector<int64_t> ready_ ABSL_GUARDED_BY(mu_);  // per local replica
  int64_t reduced_from_ ABSL_GUARDED_BY(mu_) = 0;    // summed locally
};

}  // namespace cohort

#endif  // COHORT_WORKER_GRADIENT_SYNC_H_
