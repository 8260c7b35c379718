#include "worker/data/dataset.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/file_reader.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

std::vector<float> First(const Dataset& d, int32_t* label) {
  std::vector<float> x(NumElements(d.sample_shape()));
  *label = LabelOf(d, 0, x.data());
  return x;
}

TEST(LoadDataset, SyntheticUsesTheJobSeedUnlessItsOwnIsSet) {
  DatasetSpec spec;
  spec.mutable_synthetic()->add_shape(20);
  spec.mutable_synthetic()->set_train_samples(50);
  spec.mutable_synthetic()->set_test_samples(5);
  absl::StatusOr<DataSplits> a = LoadDataset(spec, "", 1);
  absl::StatusOr<DataSplits> b = LoadDataset(spec, "", 2);
  spec.mutable_synthetic()->set_seed(1);
  absl::StatusOr<DataSplits> c = LoadDataset(spec, "", 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->train->size(), 50);
  EXPECT_EQ(a->test->size(), 5);
  EXPECT_EQ(a->train->sample_shape(), (Shape{20}));
  int32_t la, lb, lc;
  EXPECT_NE(First(*a->train, &la), First(*b->train, &lb));
  EXPECT_EQ(First(*a->train, &la), First(*c->train, &lc));
}

TEST(LoadDataset, TrainLimitKeepsTheFirstRecords) {
  DatasetSpec spec;
  spec.set_train_limit(100);
  absl::StatusOr<DataSplits> limited = LoadDataset(spec, "", 3);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->train->size(), 100);
  EXPECT_EQ(limited->test->size(), 2048);
  spec.set_train_limit(-1);
  EXPECT_THAT(LoadDataset(spec, "", 3).status().message(),
              HasSubstr("data.train_limit is -1, expected >= 0"));
}

TEST(LoadDataset, SpecErrors) {
  DatasetSpec spec;
  spec.set_kind(static_cast<DatasetSpec::Kind>(8));
  EXPECT_THAT(LoadDataset(spec, "", 0).status().message(),
              HasSubstr("data.kind 8 is not a known data set kind"));
  spec.set_kind(DatasetSpec::MNIST);
  absl::Status s = LoadDataset(spec, "", 0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("data.dir is empty: the MNIST data set"));
  spec.set_kind(DatasetSpec::SYNTHETIC);
  spec.mutable_synthetic()->set_classes(-3);
  EXPECT_THAT(LoadDataset(spec, "", 0).status().message(),
              HasSubstr("data.synthetic.classes is -3"));
}

TEST(LoadDataset, DataDirOverridesTheSpec) {
  const std::string dir = MakeTempDir();
  std::vector<uint8_t> records(2 * 3073, 0);
  records[3073] = 5;
  WriteFile(dir + "/data_batch_1.bin", records);
  WriteFile(dir + "/test_batch.bin", records);
  DatasetSpec spec;
  spec.set_kind(DatasetSpec::CIFAR10);
  spec.set_dir(dir + "/elsewhere");
  EXPECT_THAT(LoadDataset(spec, "", 0).status().message(),
              HasSubstr(dir + "/elsewhere"));
  absl::StatusOr<DataSplits> splits = LoadDataset(spec, dir, 0);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 2);
  std::vector<float> x(3072);
  EXPECT_EQ(LabelOf(*splits->train, 1, x.data()), 5);
  EXPECT_LT(x[0], -1.5f);  // normalised: (0 - 0.4914) / 0.2470
}

TEST(LoadDataset, RealMnistThroughTheSpec) {
  const std::string data = FindTestDataDir();
  if (data.empty() || !FileExists(data + "/mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << MissingDataMessage("MNIST (mnist/*.gz)");
  }
  DatasetSpec spec;
  spec.set_kind(DatasetSpec::MNIST);
  spec.set_dir(data + "/mnist");
  spec.set_train_limit(1000);
  spec.set_no_normalize(true);
  absl::StatusOr<DataSplits> splits = LoadDataset(spec, "", 0);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 1000);
  EXPECT_EQ(splits->test->size(), 10000);
  std::vector<float> x(784);
  EXPECT_EQ(LabelOf(*splits->train, 0, x.data()), 5);
  float lo = 1, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

}  // namespace
}  // namespace cohort
