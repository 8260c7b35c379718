#include "worker/comm/bucket_reducer.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

void ScaleInPlace(float* data, int64_t count, float scale) {
  int64_t i = 0;
#ifdef __AVX__
  const __m256 factor = _mm256_set1_ps(scale);
  for (; i + 8 <= count; i += 8) {
    _mm256_storeu_ps(data + i,
                     _mm256_mul_ps(_mm256_loadu_ps(data + i), factor));
  }
#endif
  for (; i < count; ++i) data[i] *= scale;
}

}  // namespace

BucketReducer::BucketReducer(Communicator* comm, int64_t bucket_bytes)
    : comm_(comm),
      bucket_elems_(std::max<int64_t>(
          1, bucket_bytes / static_cast<int64_t>(sizeof(float)))),
      lanes_(comm->lanes()) {
  CHECK_GE(lanes_, 1);
  {
    absl::MutexLock lock(&mu_);
    next_.assign(lanes_, 0);
  }
  for (int lane = 0; lane < lanes_; ++lane) {
    threads_.emplace_back([this, lane] { Loop(lane); });
  }
}

BucketReducer::~BucketReducer() {
  bool in_step;
  {
    absl::MutexLock lock(&mu_);
    in_step = in_step_;
  }
  if (in_step) Finish().IgnoreError();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void BucketReducer::SetBoundaries(std::vector<int64_t> boundaries) {
  std::sort(boundaries.begin(), boundaries.end());
  boundaries_ = std::move(boundaries);
  bound_grads_ = nullptr;  // rebind with the new buckets
}

absl::StatusOr<std::vector<GradientBucket>> BucketReducer::Plan(
    int64_t count) const {
  return PlanParameterBuckets(boundaries_, count, bucket_elems_);
}

absl::Status BucketReducer::Bind(float* grads, int64_t count) {
  if (grads == bound_grads_ && count == bound_count_) return absl::OkStatus();
  buckets_.clear();
  bound_grads_ = nullptr;
  bound_count_ = -1;
  ASSIGN_OR_RETURN(const std::vector<GradientBucket> plan, Plan(count));
  for (const GradientBucket& b : plan) {
    Bucket bucket;
    bucket.start = b.begin;
    bucket.count = b.size();
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& bucket = buckets_[i];
    if (codec_ != nullptr) {
      const absl::Status s = codec_->Bind(
          comm_, static_cast<int>(i), grads + bucket.start, bucket.start,
          bucket.count, static_cast<int>(i % lanes_));
      if (!s.ok()) {
        buckets_.clear();
        return s;
      }
      continue;
    }
    absl::StatusOr<std::unique_ptr<AllReducePlan>> plan =
        comm_->PlanAllReduceSum(grads + bucket.start, bucket.count,
                                static_cast<int>(i % lanes_));
    if (!plan.ok()) {
      buckets_.clear();
      return plan.status();
    }
    bucket.plan = std::move(plan).value();
  }
  bound_grads_ = grads;
  bound_count_ = count;
  return absl::OkStatus();
}

void BucketReducer::BeginStep(float* grads, int64_t count, float scale) {
  CHECK_GE(count, 0);
  {
    absl::MutexLock lock(&mu_);
    CHECK(!in_step_) << "BeginStep called before Finish of the last step";
  }
  absl::Status bound = Bind(grads, count);
  absl::MutexLock lock(&mu_);
  in_step_ = true;
  grads_ = grads;
  scale_ = scale;
  ready_from_ = count;
  for (int lane = 0; lane < lanes_; ++lane) next_[lane] = lane;
  to_scale_.clear();
  done_ = 0;
  error_ = bound;
}

void BucketReducer::MarkReadyFrom(int64_t offset) {
  absl::MutexLock lock(&mu_);
  ready_from_ = std::min(ready_from_, offset);
}

bool BucketReducer::NextReady(int lane) const {
  return in_step_ && next_[lane] < static_cast<int>(buckets_.size()) &&
         buckets_[next_[lane]].start >= ready_from_;
}

bool BucketReducer::HasWork(int lane) const {
  return stop_ || NextReady(lane) || !to_scale_.empty();
}

void BucketReducer::Loop(int lane) {
  auto has_work = [this, lane]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return HasWork(lane);
  };
  for (;;) {
    int reduce = -1;
    int scale = -1;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&has_work));
      if (stop_) return;
      // Communication first: scaling can be shared with Finish(), the wire
      // cannot.
      if (NextReady(lane)) {
        reduce = next_[lane];
        next_[lane] += lanes_;
      } else {
        scale = to_scale_.front();
        to_scale_.pop_front();
      }
    }
    if (reduce >= 0) Reduce(reduce, lane);
    if (scale >= 0) ScaleBucket(scale);
  }
}

void BucketReducer::Reduce(int index, int lane) {
  Bucket& bucket = buckets_[index];
  const absl::Time wall_start = observer_ ? absl::Now() : absl::InfinitePast();
  auto start = std::chrono::steady_clock::now();
  int64_t bytes = bucket.count * static_cast<int64_t>(sizeof(float));
  absl::Status status;
  if (codec_ != nullptr) {
    float scale;
    {
      absl::MutexLock lock(&mu_);
      scale = scale_;
    }
    absl::StatusOr<int64_t> sent = codec_->Reduce(index, scale);
    status = sent.status();
    if (sent.ok()) bytes = *sent;
  } else {
    status = bucket.plan->Run();
  }
  double seconds = SecondsSince(start);
  if (observer_) observer_(index, lane, bytes, wall_start, absl::Now());
  absl::MutexLock lock(&mu_);
  stats_.comm_seconds += seconds;
  if (status.ok()) {
    stats_.bytes += bytes;
  } else if (error_.ok()) {
    error_ = std::move(status);
  }
  // A codec leaves the bucket scaled.
  if (status.ok() && scale_ != 1.0f && codec_ == nullptr) {
    to_scale_.push_back(index);
  } else {
    ++done_;
  }
}

void BucketReducer::ScaleBucket(int index) {
  float* grads;
  float scale;
  {
    absl::MutexLock lock(&mu_);
    grads = grads_;
    scale = scale_;
  }
  const Bucket& bucket = buckets_[index];
  ScaleInPlace(grads + bucket.start, bucket.count, scale);
  absl::MutexLock lock(&mu_);
  ++done_;
}

absl::Status BucketReducer::Finish() {
  auto start = std::chrono::steady_clock::now();
  MarkReadyFrom(0);
  const int total = static_cast<int>(buckets_.size());
  for (;;) {
    int scale;
    {
      absl::MutexLock lock(&mu_);
      CHECK(in_step_) << "Finish called without BeginStep";
      auto ready = [this, total]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return done_ == total || !to_scale_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (done_ == total) {
        in_step_ = false;
        stats_.wait_seconds += SecondsSince(start);
        return error_;
      }
      scale = to_scale_.front();
      to_scale_.pop_front();
    }
    ScaleBucket(scale);
  }
}

BucketReducer::Stats BucketReducer::TakeStats() {
  absl::MutexLock lock(&mu_);
  return std::exchange(stats_, Stats());
}

}  // namespace cohort
