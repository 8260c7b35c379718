// Gradient buckets: which ranges of the flat gradient buffer to all-reduce,
// and when, while backward is still running. The one planner of cohort:
// the GPU engine drives it from backward's offsets; the CPU BucketReducer
// plans its buckets with it once, from the parameters' offsets.
//
// Backward produces gradients from the last layer to the first; after each
// layer with parameters the model reports the offset from which every
// gradient is final (GpuModel::Backward's `ready`). The planner turns those
// offsets into buckets: the open range [offset, end) is closed as a bucket
// once it holds at least its byte budget, so a bucket never splits a
// layer's parameters and is handed to the all-reduce as soon as its last
// layer is done. Like PyTorch DDP, the first bucket of a pass may have a
// smaller budget (1 MiB by default), so communication starts early (the CPU
// reducer keeps one budget for all, first_bytes = bytes); Finish() closes
// what is left down to offset 0. The buckets of a pass tile [0, flat_size)
// exactly (no gap, no overlap), so each gradient is summed once and the
// 1 / replicas scaling that follows yields the mean everywhere.
//
// Every replica and every process plans the same buckets from the same
// model, which NCCL needs: the collectives must match in order and size.
//
// Pure C++ (no CUDA). Ownership: plain values. Thread safety: none; one
// planner per model replica, driven by the thread running its backward.
#ifndef COHORT_WORKER_COMM_BUCKETS_H_
#define COHORT_WORKER_COMM_BUCKETS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort {

// Elements [begin, end) of the flat gradient buffer.
struct GradientBucket {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
  bool operator==(const GradientBucket& o) const {
    return begin == o.begin && end == o.end;
  }
  bool operator!=(const GradientBucket& o) const { return !(*this == o); }
};

struct BucketBudget {
  static constexpr int64_t kDefaultBytes = int64_t{25} << 20;
  static constexpr int64_t kDefaultFirstBytes = int64_t{1} << 20;  // DDP's

  int64_t bytes = kDefaultBytes;
  // The first bucket of a pass closes at min(first_bytes, bytes).
  int64_t first_bytes = kDefaultFirstBytes;
  int64_t element_bytes = sizeof(float);
};

class BucketPlanner {
 public:
  // For a flat buffer of `flat_size` elements. Budgets below one element
  // count as one element.
  BucketPlanner(int64_t flat_size, const BucketBudget& budget);

  // Starts a backward pass: nothing is final, no bucket closed.
  void Reset();

  // Gradients at index >= `offset` are final (offsets come in decreasing
  // order within a pass). Returns the bucket to all-reduce now, if the open
  // range reached its budget. An offset outside [0, end of the open range]
  // closes nothing and is reported by status().
  std::optional<GradientBucket> Ready(int64_t offset);

  // Backward is done: returns the rest of the buffer, [0, end of the open
  // range), unless empty. Nothing closes again until Reset() (a later
  // Ready with an offset above 0 is out of order).
  std::optional<GradientBucket> Finish();

  // OK, or the first out-of-order offset of this pass, naming it.
  const absl::Status& status() const { return status_; }
  // Buckets closed in this pass so far.
  int closed() const { return closed_; }

 private:
  int64_t Budget() const;

  const int64_t flat_size_;
  const int64_t bucket_elements_;
  const int64_t first_bucket_elements_;
  int64_t open_end_ = 0;  // the open range is [ready_from_, open_end_)
  int64_t ready_from_ = 0;
  int closed_ = 0;
  absl::Status status_;
};

// The buckets of one pass whose ready() calls report `offsets` in order
// (Ready for each, then Finish). INVALID_ARGUMENT for offsets out of order.
absl::StatusOr<std::vector<GradientBucket>> PlanBuckets(
    const std::vector<int64_t>& offsets, int64_t flat_size,
    const BucketBudget& budget);

// The buckets a CPU job cuts over a flat buffer of `flat_size` elements
// whose parameters start at `starts` (ascending): from the back, closed at a
// parameter's start once they hold `bucket_elems` elements, one budget for
// all. Without starts, every `bucket_elems` elements from the back. Tools
// and benchmarks call this too, so that they cut exactly what a job cuts.
absl::StatusOr<std::vector<GradientBucket>> PlanParameterBuckets(
    const std::vector<int64_t>& starts, int64_t flat_size,
    int64_t bucket_elems);

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_BUCKETS_H_
