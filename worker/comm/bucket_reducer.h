// BucketReducer: bucketed all-reduce of a flat gradient buffer, overlapped
// with the backward pass that produces it.
//
// The buffer is cut into buckets of about `bucket_bytes`, in REVERSE order
// (backward produces the last parameters first). Background threads the
// reducer owns, one per communicator lane, all-reduce each bucket as soon as
// it is marked ready (bucket i on lane i % lanes, so consecutive buckets
// overlap on the wire), then scale it by `scale` (1 / total replicas, so the
// result is the mean); scaling is shared with the caller's thread while it
// waits in Finish(), so that it overlaps the remaining communication. A scale
// of exactly 1 costs nothing: a trainer that normalizes its loss by the
// global batch gets the mean gradient from the sum, and saves a pass over
// memory.
//
// Buckets are bound to (grads, count) through Communicator plans: binding
// happens in the first BeginStep and again whenever grads or count change,
// and like every collective it must happen at the same step on every rank
// (keep the gradient buffer allocated once, as trainers do). The reducer
// does not own the communicator, which must outlive it and must not be used
// by anyone else while a step is in flight. BeginStep, MarkReadyFrom, Finish
// and TakeStats are called from one thread (MarkReadyFrom may also come from
// the threads running backward); the step protocol is
// BeginStep, MarkReadyFrom*, Finish.
#ifndef COHORT_WORKER_COMM_BUCKET_REDUCER_H_
#define COHORT_WORKER_COMM_BUCKET_REDUCER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/comm/bucket_codec.h"
#include "worker/comm/buckets.h"
#include "worker/comm/communicator.h"

namespace cohort {

class BucketReducer {
 public:
  static constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;

  BucketReducer(Communicator* comm, int64_t bucket_bytes = kDefaultBucketBytes);
  // Finishes a step still in flight, then stops the threads.
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Starts a step over grads[0, count); nothing is ready yet.
  // Offsets where a bucket may start (ascending; typically each parameter's
  // first element), so that no parameter is split across buckets and a
  // bucket is ready as soon as the layers it covers are. A bucket grows
  // parameter by parameter, from the back, until it holds bucket_bytes.
  // Empty (the default): fixed-size buckets. Takes effect at the next bind.
  void SetBoundaries(std::vector<int64_t> boundaries);

  // Called on the reducing thread after each bucket's all-reduce, with the
  // bucket's index, its lane, its bytes and when the all-reduce began and
  // ended (for a timeline). Set between steps.
  using Observer = std::function<void(int bucket, int lane, int64_t bytes,
                                      absl::Time start, absl::Time end)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  // Buckets travel through `codec` (borrowed; null: floats, uncompressed).
  // Set before the first step.
  void set_codec(BucketCodec* codec) {
    codec_ = codec;
    bound_grads_ = nullptr;
  }

  void BeginStep(float* grads, int64_t count, float scale);
  // Everything at index >= `offset` is final for this step (called as
  // backward progresses; may be called repeatedly with decreasing offsets;
  // 0 = all). Non-blocking.
  void MarkReadyFrom(int64_t offset);
  // Marks everything ready, blocks until every bucket is reduced and scaled,
  // and returns the step's first error, if any.
  absl::Status Finish();

  struct Stats {
    int64_t bytes = 0;        // all-reduced
    double comm_seconds = 0;  // inside all-reduce calls (background thread)
    double wait_seconds = 0;  // the caller blocked in Finish()
  };
  Stats TakeStats();  // since the last call

  int num_buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    int64_t start = 0;
    int64_t count = 0;
    std::unique_ptr<AllReducePlan> plan;
  };

  absl::Status Bind(float* grads, int64_t count);
  absl::StatusOr<std::vector<GradientBucket>> Plan(int64_t count) const;
  bool HasWork(int lane) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextReady(int lane) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop(int lane);
  void Reduce(int index, int lane);
  void ScaleBucket(int index);

  Communicator* const comm_;
  const int64_t bucket_elems_;
  std::vector<int64_t> boundaries_;
  const int lanes_;
  Observer observer_;
  BucketCodec* codec_ = nullptr;
  // Written by the caller between steps only; read by the thread in a step.
  std::vector<Bucket> buckets_;
  float* bound_grads_ = nullptr;
  int64_t bound_count_ = -1;

  absl::Mutex mu_;
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  float* grads_ ABSL_GUARDED_BY(mu_) = nullptr;
  float scale_ ABSL_GUARDED_BY(mu_) = 1.0f;
  int64_t ready_from_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> next_ ABSL_GUARDED_BY(mu_);     // next bucket, per lane
  std::deque<int> to_scale_ ABSL_GUARDED_BY(mu_);  // reduced, not scaled
  int done_ ABSL_GUARDED_BY(mu_) = 0;              // reduced and scaled
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_BUCKET_REDUCER_H_
