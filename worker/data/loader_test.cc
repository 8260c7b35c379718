#include "worker/data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/data/sampler.h"
#include "worker/data/synthetic.h"

namespace cohort {
namespace {

// Sample i has features i * 1000 + j and label i % 7; Get may sleep a
// pseudo-random while so that threads finish out of order.
class FakeDataset : public LabelledDataset {
 public:
  FakeDataset(int64_t size, Shape shape, int max_sleep_us = 0)
      : size_(size), shape_(std::move(shape)), max_sleep_us_(max_sleep_us) {}
  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  int num_classes() const override { return 7; }
  int32_t Get(int64_t index, float* out) const override {
    if (max_sleep_us_ > 0) {
      std::this_thread::sleep_for(
          std::chrono::microseconds((index * 7919) % max_sleep_us_));
    }
    for (int64_t j = 0; j < NumElements(shape_); ++j) {
      out[j] = static_cast<float>(index * 1000 + j);
    }
    return static_cast<int32_t>(index % 7);
  }

 private:
  int64_t size_;
  Shape shape_;
  int max_sleep_us_;
};

std::vector<int64_t> Shuffled(int64_t n, uint64_t seed) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return v;
}

// Runs a loader over `indices` and checks every batch, outer layout.
void CheckOuter(int threads, int prefetch, bool drop_last) {
  FakeDataset data(500, {2, 3}, 200);
  const std::vector<int64_t> indices = Shuffled(103, threads);
  Loader loader(&data, indices, 10, drop_last, BatchLayout::kBatchOuter,
                threads, prefetch);
  const int64_t expected_batches = drop_last ? 10 : 11;
  EXPECT_EQ(loader.num_batches(), expected_batches);
  Batch batch;
  int64_t b = 0, pos = 0;
  while (loader.Next(&batch)) {
    const int64_t n = b < 10 ? 10 : 3;
    ASSERT_EQ(batch.features.shape(), (Shape{n, 2, 3}));
    ASSERT_EQ(static_cast<int64_t>(batch.labels.size()), n);
    EXPECT_EQ(batch.step_in_epoch, b);
    for (int64_t k = 0; k < n; ++k, ++pos) {
      const int64_t index = indices[pos];
      EXPECT_EQ(batch.labels[k], index % 7);
      for (int64_t j = 0; j < 6; ++j) {
        ASSERT_EQ(batch.features[k * 6 + j], index * 1000 + j);
      }
    }
    ++b;
  }
  EXPECT_EQ(b, expected_batches);
  EXPECT_EQ(pos, drop_last ? 100 : 103);
  EXPECT_FALSE(loader.Next(&batch));
}

TEST(Loader, DeliversEveryIndexInOrderWithOneThread) {
  CheckOuter(1, 1, false);
}

TEST(Loader, DeliversInOrderWithManyThreads) {
  CheckOuter(4, 2, false);
  CheckOuter(3, 8, false);
}

TEST(Loader, DropLastDropsThePartialBatch) { CheckOuter(2, 3, true); }

TEST(Loader, BatchInnerLayoutIsChannelMajor) {
  FakeDataset data(50, {3, 2, 2});
  const std::vector<int64_t> indices = Shuffled(50, 3);
  Loader loader(&data, indices, 8, false, BatchLayout::kBatchInner, 2, 2);
  Batch batch;
  int64_t pos = 0;
  while (loader.Next(&batch)) {
    const int64_t n = batch.features.dim(1);
    ASSERT_EQ(batch.features.shape(), (Shape{3, n, 2, 2}));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t index = indices[pos + k];
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t p = 0; p < 4; ++p) {
          ASSERT_EQ(batch.features[(c * n + k) * 4 + p],
                    index * 1000 + c * 4 + p);
        }
      }
    }
    pos += n;
  }
  EXPECT_EQ(pos, 50);
  EXPECT_EQ(batch.features.dim(1), 2);  // the last batch: 50 = 6 * 8 + 2
}

TEST(Loader, BatchInnerOfRankOneSamplesIsBatchOuter) {
  FakeDataset data(10, {5});
  Loader loader(&data, {4, 2, 9}, 2, false, BatchLayout::kBatchInner, 1, 1);
  Batch batch;
  ASSERT_TRUE(loader.Next(&batch));
  EXPECT_EQ(batch.features.shape(), (Shape{2, 5}));
  EXPECT_EQ(batch.features[5], 2000.0f);
  ASSERT_TRUE(loader.Next(&batch));
  EXPECT_EQ(batch.features.shape(), (Shape{1, 5}));
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{9 % 7}));
  EXPECT_FALSE(loader.Next(&batch));
}

TEST(Loader, ReusesBuffersInSteadyState) {
  FakeDataset data(1000, {4, 4});
  Loader loader(&data, Shuffled(1000, 1), 10, false, BatchLayout::kBatchOuter,
                2, 3);
  Batch batch;
  std::set<const float*> buffers;
  while (loader.Next(&batch)) buffers.insert(batch.features.data());
  // The ring (3 slots) plus the caller's batch: 100 batches, 4 buffers.
  EXPECT_LE(buffers.size(), 4u);
}

TEST(Loader, EmptyIndicesGiveNoBatches) {
  FakeDataset data(10, {3});
  Loader loader(&data, {}, 4, false, BatchLayout::kBatchOuter, 2, 2);
  EXPECT_EQ(loader.num_batches(), 0);
  Batch batch;
  EXPECT_FALSE(loader.Next(&batch));
}

TEST(Loader, DestructionMidEpochIsPrompt) {
  // ~1 ms per sample, 256 per batch: a batch takes ~0.25 s on one thread, so
  // only stopping mid-batch meets the limits below.
  FakeDataset data(100000, {8}, 2000);
  for (int consumed : {0, 1}) {
    const auto start = std::chrono::steady_clock::now();
    {
      Loader loader(&data, Shuffled(100000, 2), 256, false,
                    BatchLayout::kBatchOuter, 3, 4);
      Batch batch;
      for (int i = 0; i < consumed; ++i) ASSERT_TRUE(loader.Next(&batch));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    EXPECT_LT(seconds, consumed == 0 ? 0.2 : 0.6) << consumed << " consumed";
  }
}

TEST(Loader, FeedsASamplersShardOfASyntheticSet) {
  SyntheticOptions o;
  o.shape = {2, 4, 4};
  o.train_samples = 100;
  o.test_samples = 10;
  o.seed = 4;
  SyntheticDataset data(o, SyntheticDataset::Split::kTrain);
  DistributedSampler sampler(data.size(), 3, 1, 8);
  const std::vector<int64_t> indices = sampler.Indices(2);
  Loader loader(&data, indices, 16, false, BatchLayout::kBatchOuter, 2, 2);
  Batch batch;
  std::vector<float> expected(32);
  int64_t pos = 0;
  while (loader.Next(&batch)) {
    for (size_t k = 0; k < batch.labels.size(); ++k, ++pos) {
      EXPECT_EQ(batch.labels[k], data.Get(indices[pos], expected.data()));
      for (int j = 0; j < 32; ++j) {
        ASSERT_EQ(batch.features[k * 32 + j], expected[j]);
      }
    }
  }
  EXPECT_EQ(pos, sampler.num_samples());
}

// Samples whose index is a multiple of 5 fail to read; the others record
// the draw they were given.
class FlakyDataset : public Dataset {
 public:
  int64_t size() const override { return 20; }
  const Shape& sample_shape() const override { return shape_; }
  int num_classes() const override { return 20; }
  absl::Status Read(int64_t index, uint64_t draw,
                    SampleOut& out) const override {
    if (index % 5 == 0) {
      return absl::DataLossError(absl::StrCat("sample ", index, " is bad"));
    }
    out.features[0] = static_cast<float>(draw % 1000);
    out.label = static_cast<int32_t>(index);
    return absl::OkStatus();
  }

 private:
  Shape shape_{1};
};

TEST(Loader, AReadErrorReachesTheBatch) {
  FlakyDataset data;
  Loader loader(&data, {1, 2, 5, 6}, 4, false, BatchLayout::kBatchOuter, 1, 1);
  Batch batch;
  ASSERT_TRUE(loader.Next(&batch));
  EXPECT_EQ(batch.error.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(batch.error.message(), "sample 5 is bad");
}

TEST(Loader, SkippingReplacesABadSampleWithTheNextReadableOne) {
  FlakyDataset data;
  ReadOptions read;
  read.skip_bad_samples = true;
  read.draw_seed = 42;
  Loader loader(&data, {1, 5, 10, 19}, 4, false, BatchLayout::kBatchOuter, 1, 1,
                read);
  Batch batch;
  ASSERT_TRUE(loader.Next(&batch));
  ASSERT_TRUE(batch.error.ok()) << batch.error;
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{1, 6, 11, 19}));
  EXPECT_EQ(batch.skipped, 2);
  // Draws depend on the seed and the index alone: the same again.
  Loader again(&data, {1, 5, 10, 19}, 4, false, BatchLayout::kBatchOuter, 2, 2,
               read);
  Batch second;
  ASSERT_TRUE(again.Next(&second));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(second.features[k], batch.features[k]);
}

}  // namespace
}  // namespace cohort
