#include "worker/comm/buckets.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;

BucketBudget Budget(int64_t bytes, int64_t first_bytes) {
  BucketBudget b;
  b.bytes = bytes;
  b.first_bytes = first_bytes;
  return b;
}

// The offsets backward reports for layers of `sizes` elements laid out
// from `start` on: each layer's first parameter, last layer first.
std::vector<int64_t> ReadyOffsets(const std::vector<int64_t>& sizes,
                                  int64_t start = 0) {
  std::vector<int64_t> offsets;
  int64_t at = start;
  for (int64_t s : sizes) {
    offsets.push_back(at);
    at += s;
  }
  return std::vector<int64_t>(offsets.rbegin(), offsets.rend());
}

int64_t Total(const std::vector<int64_t>& sizes, int64_t start = 0) {
  int64_t t = start;
  for (int64_t s : sizes) t += s;
  return t;
}

TEST(BucketPlanner, FirstBucketIsSmallerLikeDdp) {
  // Eight layers of 0.5 MiB of floats, 2 MiB buckets, a 1 MiB first one.
  const std::vector<int64_t> sizes(8, kMiB / 8);
  auto buckets =
      PlanBuckets(ReadyOffsets(sizes), Total(sizes), Budget(2 * kMiB, kMiB));
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  const int64_t layer = kMiB / 8;
  EXPECT_THAT(*buckets, ElementsAre(GradientBucket{6 * layer, 8 * layer},
                                    GradientBucket{2 * layer, 6 * layer},
                                    GradientBucket{0, 2 * layer}));
}

TEST(BucketPlanner, FirstBudgetNeverExceedsTheBucketBudget) {
  const std::vector<int64_t> sizes(4, 100);  // 400 bytes each
  auto buckets =
      PlanBuckets(ReadyOffsets(sizes), Total(sizes), Budget(800, kMiB));
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(*buckets,
              ElementsAre(GradientBucket{200, 400}, GradientBucket{0, 200}));
}

TEST(BucketPlanner, LayerLargerThanTheBudgetIsOneBucket) {
  // A 10 MiB layer between small ones is never split; its bucket closes
  // right after it.
  const std::vector<int64_t> sizes = {10, 10 * kMiB / 4, 10, 10};
  auto buckets = PlanBuckets(ReadyOffsets(sizes), Total(sizes),
                             Budget(4 * kMiB, 4 * kMiB));
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  const int64_t big_end = 10 + 10 * kMiB / 4;
  EXPECT_THAT(*buckets, ElementsAre(GradientBucket{10, big_end + 20},
                                    GradientBucket{0, 10}));
}

TEST(BucketPlanner, FinishCoversWhatNoLayerReported) {
  // Parameters starting at 16 (say, padding first): the last bucket still
  // starts at 0, so nothing is left out of the all-reduce.
  const std::vector<int64_t> sizes = {100, 100};
  auto buckets =
      PlanBuckets(ReadyOffsets(sizes, 16), Total(sizes, 16), Budget(1000, 400));
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(*buckets,
              ElementsAre(GradientBucket{116, 216}, GradientBucket{0, 116}));
}

TEST(BucketPlanner, ModelWithoutParametersHasNoBuckets) {
  auto buckets = PlanBuckets({}, 0, BucketBudget());
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_TRUE(buckets->empty());
}

TEST(BucketPlanner, BudgetBelowOneElementGivesEachLayerItsBucket) {
  const std::vector<int64_t> sizes = {3, 5, 7};
  auto buckets = PlanBuckets(ReadyOffsets(sizes), Total(sizes), Budget(1, 1));
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(*buckets, ElementsAre(GradientBucket{8, 15}, GradientBucket{3, 8},
                                    GradientBucket{0, 3}));
}

TEST(BucketPlanner, OffsetsOutOfOrderAreReported) {
  auto up = PlanBuckets({10, 20}, 100, BucketBudget());
  EXPECT_EQ(up.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(up.status().message(), HasSubstr("offset 20 after 10"));

  auto past_end = PlanBuckets({101}, 100, BucketBudget());
  EXPECT_EQ(past_end.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past_end.status().message(), HasSubstr("offset 101 after 100"));

  auto negative = PlanBuckets({-1}, 100, BucketBudget());
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BucketPlanner, RepeatedOffsetClosesNothingNew) {
  BucketPlanner p(100, Budget(40, 40));
  EXPECT_EQ(p.Ready(50), (GradientBucket{50, 100}));
  EXPECT_EQ(p.Ready(50), std::nullopt);
  EXPECT_EQ(p.Finish(), (GradientBucket{0, 50}));
  EXPECT_TRUE(p.status().ok()) << p.status();
  EXPECT_EQ(p.closed(), 2);
}

TEST(BucketPlanner, ResetPlansTheSameBucketsEveryPass) {
  const std::vector<int64_t> sizes = {300, 20, 500, 40, 1000, 7};
  const std::vector<int64_t> offsets = ReadyOffsets(sizes);
  BucketPlanner p(Total(sizes), Budget(2000, 400));
  std::vector<GradientBucket> first;
  for (int pass = 0; pass < 3; ++pass) {
    p.Reset();
    std::vector<GradientBucket> got;
    for (int64_t o : offsets) {
      if (auto b = p.Ready(o)) got.push_back(*b);
    }
    if (auto b = p.Finish()) got.push_back(*b);
    ASSERT_TRUE(p.status().ok()) << p.status();
    if (pass == 0) {
      first = got;
    } else {
      EXPECT_EQ(got, first) << "pass " << pass;
    }
  }
  EXPECT_GE(first.size(), 2u);
}

// Random layer sizes and budgets: the buckets tile [0, flat) in backward
// order, start at reported offsets (or 0), hold at least their budget
// (except the last) and close at the first layer that reaches it.
TEST(BucketPlanner, BucketsTileTheBufferAndCloseAsSoonAsFull) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> sizes(1 + rng() % 30);
    for (int64_t& s : sizes) s = 1 + rng() % 5000;
    const int64_t start = rng() % 3 == 0 ? rng() % 64 : 0;
    const std::vector<int64_t> offsets = ReadyOffsets(sizes, start);
    const int64_t flat = Total(sizes, start);
    const BucketBudget budget =
        Budget(4 * (1 + rng() % 20000), 4 * (1 + rng() % 20000));
    auto buckets = PlanBuckets(offsets, flat, budget);
    ASSERT_TRUE(buckets.ok()) << buckets.status();
    ASSERT_FALSE(buckets->empty());
    int64_t end = flat;
    for (size_t i = 0; i < buckets->size(); ++i) {
      const GradientBucket& b = (*buckets)[i];
      ASSERT_EQ(b.end, end) << "trial " << trial << " bucket " << i;
      ASSERT_LT(b.begin, b.end) << "trial " << trial << " bucket " << i;
      end = b.begin;
      if (i + 1 == buckets->size()) continue;
      const int64_t want =
          (i == 0 ? std::min(budget.first_bytes, budget.bytes) : budget.bytes) /
          4;
      EXPECT_GE(b.size(), want) << "trial " << trial << " bucket " << i;
      // One layer less (the offset reported just before b.begin) was not
      // enough yet.
      auto at = std::find(offsets.begin(), offsets.end(), b.begin);
      ASSERT_NE(at, offsets.end()) << "trial " << trial << " bucket " << i;
      const int64_t previous = at == offsets.begin() ? flat : *(at - 1);
      EXPECT_LT(b.end - previous, want) << "trial " << trial << " bucket " << i;
    }
    EXPECT_EQ(end, 0) << "trial " << trial;
  }
}

// What the trainer does with the plan: all-reduce (sum) each bucket over
// the replicas, then scale the whole buffer by 1 / replicas. Every element
// must end up as the mean, which fails if a bucket overlaps another
// (summed twice) or one is missing (not summed).
TEST(BucketPlanner, BucketedSumThenScaleIsTheMean) {
  const std::vector<int64_t> sizes = {5, 17, 3, 40, 1, 22};
  const int64_t flat = Total(sizes, 2);
  const int replicas = 3;
  std::vector<std::vector<float>> grads(replicas, std::vector<float>(flat));
  for (int r = 0; r < replicas; ++r) {
    for (int64_t i = 0; i < flat; ++i) grads[r][i] = (r + 1) * (i + 1);
  }
  auto buckets = PlanBuckets(ReadyOffsets(sizes, 2), flat, Budget(64, 16));
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  ASSERT_GE(buckets->size(), 3u);
  for (const GradientBucket& b : *buckets) {
    for (int64_t i = b.begin; i < b.end; ++i) {
      float sum = 0;
      for (int r = 0; r < replicas; ++r) sum += grads[r][i];
      for (int r = 0; r < replicas; ++r) grads[r][i] = sum;
    }
  }
  for (int r = 0; r < replicas; ++r) {
    for (int64_t i = 0; i < flat; ++i) {
      const float mean = grads[r][i] * (1.0f / replicas);
      ASSERT_FLOAT_EQ(mean, 2.0f * (i + 1)) << "replica " << r << " at " << i;
    }
  }
}

}  // namespace
}  // namespace cohort
