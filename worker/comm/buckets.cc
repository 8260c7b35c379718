#include "worker/comm/buckets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

int64_t Elements(int64_t bytes, int64_t element_bytes) {
  return std::max<int64_t>(1, bytes / std::max<int64_t>(1, element_bytes));
}

}  // namespace

BucketPlanner::BucketPlanner(int64_t flat_size, const BucketBudget& budget)
    : flat_size_(std::max<int64_t>(0, flat_size)),
      bucket_elements_(Elements(budget.bytes, budget.element_bytes)),
      first_bucket_elements_(Elements(
          std::min(budget.first_bytes, budget.bytes), budget.element_bytes)) {
  Reset();
}

void BucketPlanner::Reset() {
  open_end_ = flat_size_;
  ready_from_ = flat_size_;
  closed_ = 0;
  status_ = absl::OkStatus();
}

int64_t BucketPlanner::Budget() const {
  return closed_ == 0 ? first_bucket_elements_ : bucket_elements_;
}

std::optional<GradientBucket> BucketPlanner::Ready(int64_t offset) {
  if (offset < 0 || offset > ready_from_) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(
          "gradient buckets: backward reported offset ", offset, " after ",
          ready_from_, "; offsets must decrease from ", flat_size_,
          " (the flat gradient's size) to 0 within a pass"));
    }
    return std::nullopt;
  }
  ready_from_ = offset;
  if (open_end_ - ready_from_ < Budget()) return std::nullopt;
  const GradientBucket bucket{ready_from_, open_end_};
  open_end_ = ready_from_;
  ++closed_;
  return bucket;
}

std::optional<GradientBucket> BucketPlanner::Finish() {
  // Everything is final now, including [0, ready_from_) that no layer
  // reported (a model whose first parameters do not start at 0).
  ready_from_ = 0;
  if (open_end_ == 0) return std::nullopt;
  const GradientBucket bucket{0, open_end_};
  open_end_ = 0;
  ++closed_;
  return bucket;
}

absl::StatusOr<std::vector<GradientBucket>> PlanBuckets(
    const std::vector<int64_t>& offsets, int64_t flat_size,
    const BucketBudget& budget) {
  BucketPlanner planner(flat_size, budget);
  std::vector<GradientBucket> buckets;
  for (int64_t offset : offsets) {
    if (std::optional<GradientBucket> b = planner.Ready(offset)) {
      buckets.push_back(*b);
    }
  }
  if (std::optional<GradientBucket> b = planner.Finish()) buckets.push_back(*b);
  if (!planner.status().ok()) return planner.status();
  return buckets;
}

absl::StatusOr<std::vector<GradientBucket>> PlanParameterBuckets(
    const std::vector<int64_t>& starts, int64_t flat_size,
    int64_t bucket_elems) {
  std::vector<int64_t> offsets;
  if (starts.empty()) {
    for (int64_t end = flat_size - bucket_elems; end > 0; end -= bucket_elems) {
      offsets.push_back(end);
    }
  } else {
    for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
      if (*it > 0 && *it < flat_size) offsets.push_back(*it);
    }
  }
  BucketBudget budget;
  budget.bytes = bucket_elems * static_cast<int64_t>(sizeof(float));
  budget.first_bytes = budget.bytes;
  return PlanBuckets(offsets, flat_size, budget);
}

}  // namespace cohort
