#include "worker/exchange/allreduce_exchange.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/exchange/replica_sum.h"
#include "worker/timeline.h"

namespace cohort {

AllReduceExchange::AllReduceExchange(std::vector<float*> replica_grads,
                                     int64_t count, int total_replicas,
                                     Communicator* comm, int64_t bucket_bytes,
                                     std::vector<int64_t> param_offsets,
                                     Timeline* timeline,
                                     std::unique_ptr<BucketCodec> codec)
    : grads_(std::move(replica_grads)),
      count_(count),
      total_replicas_(total_replicas),
      codec_(std::move(codec)),
      reducer_(comm, bucket_bytes),
      ready_(grads_.size(), count) {
  reducer_.SetBoundaries(std::move(param_offsets));
  reducer_.set_codec(codec_.get());
  if (timeline != nullptr) {
    reducer_.set_observer([timeline](int bucket, int lane, int64_t bytes,
                                     absl::Time start, absl::Time end) {
      timeline->Add(
          "allreduce", Timeline::kBucketLane + lane, start, end,
          absl::StrCat("\"bucket\": ", bucket, ", \"bytes\": ", bytes));
    });
  }
}

AllReduceExchange::~AllReduceExchange() = default;

void AllReduceExchange::BeginStep(const ExchangeStep& step) {
  if (codec_ != nullptr) codec_->BeginStep(step.clock);
  {
    absl::MutexLock lock(&mu_);
    std::fill(ready_.begin(), ready_.end(), count_);
    reduced_from_ = count_;
  }
  reducer_.BeginStep(grads_[0], count_, 1.0f / total_replicas_);
}

void AllReduceExchange::RangeReady(int replica, int64_t offset) {
  absl::MutexLock lock(&mu_);
  ready_[replica] = std::min(ready_[replica], offset);
  // The replica furthest behind decides what is final everywhere.
  const int64_t from = *std::max_element(ready_.begin(), ready_.end());
  if (from >= reduced_from_) return;
  // A local sum; the mean is taken after the cross-worker sum (the reducer
  // scales by 1 / total replicas).
  SumReplicasInto(grads_, static_cast<int>(grads_.size()), from, reduced_from_,
                  1.0f);
  reduced_from_ = from;
  reducer_.MarkReadyFrom(from);
}

ExchangeStats AllReduceExchange::TakeStats() {
  const BucketReducer::Stats s = reducer_.TakeStats();
  return {s.bytes, s.comm_seconds};
}

std::vector<float> AllReduceExchange::SaveState() const {
  return codec_ != nullptr ? codec_->SaveState() : std::vector<float>();
}

absl::Status AllReduceExchange::LoadState(std::vector<float> state) {
  if (codec_ == nullptr) {
    return state.empty() ? absl::OkStatus()
                         : absl::InvalidArgumentError(
                               "saved compression state, but this job "
                               "compresses nothing");
  }
  return codec_->LoadState(std::move(state));
}

}  // namespace cohort
