#include "worker/data/sampler.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// How often each index appears across all ranks' lists for `epoch`.
std::map<int64_t, int> Coverage(int64_t size, int64_t replicas, bool shuffle,
                                bool drop_last, int64_t epoch) {
  std::map<int64_t, int> seen;
  for (int64_t r = 0; r < replicas; ++r) {
    DistributedSampler s(size, replicas, r, 7, shuffle, drop_last);
    const std::vector<int64_t> idx = s.Indices(epoch);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), s.num_samples());
    for (int64_t i : idx) {
      EXPECT_TRUE(i >= 0 && i < size) << i;
      ++seen[i];
    }
  }
  return seen;
}

TEST(DistributedSampler, DeterministicPerSeedAndEpoch) {
  DistributedSampler a(1000, 4, 2, 123), b(1000, 4, 2, 123);
  DistributedSampler other_seed(1000, 4, 2, 124);
  EXPECT_EQ(a.Indices(3), b.Indices(3));
  EXPECT_NE(a.Indices(3), a.Indices(4));
  EXPECT_NE(a.Indices(3), other_seed.Indices(3));
}

TEST(DistributedSampler, ShufflesAndWithoutShuffleIsStrided) {
  DistributedSampler shuffled(100, 1, 0, 5);
  std::vector<int64_t> idx = shuffled.Indices(0);
  std::vector<int64_t> sorted = idx;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(idx, sorted);
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
  DistributedSampler plain(10, 3, 1, 5, /*shuffle=*/false);
  EXPECT_EQ(plain.Indices(0),
            (std::vector<int64_t>{1, 4, 7, 0}));  // 0: padding
  EXPECT_EQ(plain.Indices(9), plain.Indices(0));
}

TEST(DistributedSampler, UnionOverRanksCoversOnceWhenDivisible) {
  std::map<int64_t, int> seen = Coverage(120, 4, true, false, 2);
  ASSERT_EQ(seen.size(), 120u);
  for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << index;
}

TEST(DistributedSampler, UnevenSizeIsPaddedFromTheStart) {
  // 10 samples, 4 replicas: 3 each, the permutation's first 2 repeated.
  std::map<int64_t, int> seen = Coverage(10, 4, true, false, 1);
  ASSERT_EQ(seen.size(), 10u);
  int twice = 0;
  for (const auto& [index, count] : seen) {
    EXPECT_LE(count, 2);
    twice += count == 2;
  }
  EXPECT_EQ(twice, 2);
  // Unshuffled the padding is exactly indices 0 and 1, as in PyTorch.
  DistributedSampler last(10, 4, 3, 0, /*shuffle=*/false);
  EXPECT_EQ(last.Indices(0), (std::vector<int64_t>{3, 7, 1}));
  DistributedSampler third(10, 4, 2, 0, /*shuffle=*/false);
  EXPECT_EQ(third.Indices(0), (std::vector<int64_t>{2, 6, 0}));
}

TEST(DistributedSampler, PaddingWrapsMoreThanOnceForTinyDataSets) {
  // 2 samples over 5 replicas: padded list is p0 p1 p0 p1 p0.
  std::map<int64_t, int> seen = Coverage(2, 5, false, false, 0);
  EXPECT_EQ(seen[0], 3);
  EXPECT_EQ(seen[1], 2);
}

TEST(DistributedSampler, DropLastTruncates) {
  DistributedSampler s(10, 4, 0, 3, true, /*drop_last=*/true);
  EXPECT_EQ(s.num_samples(), 2);
  std::map<int64_t, int> seen = Coverage(10, 4, true, true, 5);
  EXPECT_EQ(seen.size(), 8u);
  for (const auto& [index, count] : seen) EXPECT_EQ(count, 1);
  DistributedSampler plain(10, 4, 1, 3, false, true);
  EXPECT_EQ(plain.Indices(0), (std::vector<int64_t>{1, 5}));
  DistributedSampler empty(3, 4, 3, 3, true, true);
  EXPECT_TRUE(empty.Indices(0).empty());
}

TEST(DistributedSampler, RanksAgreeOnThePermutation) {
  // Interleaving the ranks' lists rebuilds one permutation of [0, size).
  const int64_t size = 1001, replicas = 7;
  std::vector<std::vector<int64_t>> lists;
  for (int64_t r = 0; r < replicas; ++r) {
    lists.push_back(DistributedSampler(size, replicas, r, 99).Indices(4));
  }
  std::vector<int64_t> order;
  for (size_t k = 0; k < lists[0].size(); ++k) {
    for (const auto& l : lists) order.push_back(l[k]);
  }
  ASSERT_EQ(order.size(), 1001u);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < size; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(DistributedSampler, PermutationIsRoughlyUniform) {
  // Where index 0 lands, over many epochs, spreads across all positions.
  std::vector<int> position_count(8, 0);
  DistributedSampler s(8, 1, 0, 11);
  for (int64_t epoch = 0; epoch < 4000; ++epoch) {
    const std::vector<int64_t> idx = s.Indices(epoch);
    ++position_count[std::find(idx.begin(), idx.end(), 0) - idx.begin()];
  }
  for (int count : position_count) EXPECT_NEAR(count, 500, 100);
}

// An elastic epoch: `worlds[i]` replicas train `steps[i]` steps of batch
// `batch` each, then the world changes; the last world finishes the epoch.
// Returns how often each sample was trained, and the padding positions
// (samples trained past the epoch's end) in `padding`.
std::map<int64_t, int> ElasticEpoch(int64_t size, int64_t batch,
                                    const std::vector<int64_t>& worlds,
                                    const std::vector<int64_t>& steps,
                                    int64_t* padding) {
  std::map<int64_t, int> seen;
  int64_t position = 0;
  *padding = 0;
  for (size_t w = 0; w < worlds.size(); ++w) {
    const int64_t R = worlds[w];
    const bool last = w + 1 == worlds.size();
    int64_t done = 0;  // per replica
    for (int64_t r = 0; r < R; ++r) {
      DistributedSampler s(size, R, r, 99);
      std::vector<int64_t> idx = s.IndicesFrom(3, position);
      EXPECT_EQ(static_cast<int64_t>(idx.size()), s.NumSamplesFrom(position));
      const int64_t take =
          last ? static_cast<int64_t>(idx.size())
               : std::min<int64_t>(idx.size(), steps[w] * batch);
      for (int64_t k = 0; k < take; ++k) ++seen[idx[k]];
      done = take;
    }
    const int64_t advanced = done * R;
    if (last) *padding = position + advanced - size;
    position = std::min(size, position + advanced);
  }
  return seen;
}

TEST(DistributedSampler, FromZeroIsTheWholeEpoch) {
  for (int64_t r = 0; r < 3; ++r) {
    DistributedSampler s(1001, 3, r, 5);
    EXPECT_EQ(s.IndicesFrom(2, 0), s.Indices(2));
    EXPECT_EQ(s.NumSamplesFrom(0), s.num_samples());
  }
}

TEST(DistributedSampler, ResumingAtAStepOfTheSameWorldIsTheSameEpoch) {
  const int64_t batch = 8, R = 3;
  for (int64_t r = 0; r < R; ++r) {
    DistributedSampler s(1001, R, r, 5);
    const std::vector<int64_t> whole = s.Indices(4);
    const std::vector<int64_t> rest = s.IndicesFrom(4, 10 * batch * R);
    ASSERT_EQ(rest.size(), whole.size() - 10 * batch);
    EXPECT_TRUE(std::equal(rest.begin(), rest.end(), whole.begin() + 80));
  }
}

TEST(DistributedSampler, ElasticEpochCoversEverySampleOnce) {
  // 3 workers, one dies after 7 steps; 2 train 5 steps; a replacement
  // brings the world back to 3 for the rest of the epoch.
  const int64_t size = 1000, batch = 8;
  int64_t padding = 0;
  std::map<int64_t, int> seen =
      ElasticEpoch(size, batch, {3, 2, 3}, {7, 5, 0}, &padding);
  ASSERT_EQ(static_cast<int64_t>(seen.size()), size);  // nothing skipped
  int64_t extra = 0;
  for (const auto& [index, count] : seen) extra += count - 1;
  // Only the last world's padding repeats samples: fewer than its replicas.
  EXPECT_EQ(extra, padding);
  EXPECT_GE(padding, 0);
  EXPECT_LT(padding, 3);
}

TEST(DistributedSampler, ElasticEpochWithoutPaddingRepeatsNothing) {
  // 168 + 96 samples in the first two worlds; 696 left divide by 4.
  const int64_t size = 960, batch = 8;
  int64_t padding = 0;
  std::map<int64_t, int> seen =
      ElasticEpoch(size, batch, {3, 2, 4}, {7, 6, 0}, &padding);
  EXPECT_EQ(padding, 0);
  ASSERT_EQ(static_cast<int64_t>(seen.size()), size);
  for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << index;
}

TEST(DistributedSampler, PositionPastTheEndLeavesNothing) {
  DistributedSampler s(100, 4, 1, 5);
  EXPECT_EQ(s.NumSamplesFrom(100), 0);
  EXPECT_TRUE(s.IndicesFrom(0, 150).empty());
  DistributedSampler d(100, 3, 2, 5, true, /*drop_last=*/true);
  EXPECT_EQ(d.NumSamplesFrom(97), 1);
  EXPECT_EQ(d.NumSamplesFrom(98), 0);
}

}  // namespace
}  // namespace cohort
