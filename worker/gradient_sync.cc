#include "worker/gradient_sync.h"

#include <algorithm>

namespace cohort {

GradientSync::GradientSync(std::vector<float*> replica_grads, int64_t count,
                           int total_replicas, Communicator* comm,
                           int64_t bucket_bytes,
                           std::vector<int64_t> param_offsets)
    : grads_(std::move(replica_grads)),
      count_(count),
      total_replicas_(total_replicas),
      reducer_(comm, bucket_bytes),
      ready_(grads_.size(), count) {
  reducer_.SetBoundaries(std::move(param_offsets));
}

void GradientSync::BeginStep() {
  {
    absl::MutexLock lock(&mu_);
    std::fill(ready_.begin(), ready_.end(), count_);
    reduced_from_ = count_;
  }
  reducer_.BeginStep(grads_[0], count_, 1.0f / total_replicas_);
}

void GradientSync::Ready(int replica, int64_t offset) {
  absl::MutexLock lock(&mu_);
  ready_[replica] = std::min(ready_[replica], offset);
  // The replica furthest behind decides what is final everywhere.
  const int64_t from = *std::max_element(ready_.begin(), ready_.end());
  if (from >= reduced_from_) return;
  // Local sum of the newly finished range; the mean is taken after the
  // cross-worker sum (the reducer scales by 1 / total replicas).
  float* g0 = grads_[0];
  for (size_t q = 1; q < grads_.size(); ++q) {
    const float* gq = grads_[q];
    for (int64_t i = from; i < reduced_from_; ++i) g0[i] += gq[i];
  }
  reduced_from_ = from;
  reducer_.MarkReadyFrom(from);
}

absl::Status GradientSync::Finish() { return reducer_.Finish(); }

}  // namespace cohort
