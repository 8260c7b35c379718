#include "worker/data/cifar10.h"

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/file_reader.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

// `labels.size()` records; byte p of record r's image is (r * 3 + p) % 256.
std::vector<uint8_t> Records(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> out;
  for (size_t r = 0; r < labels.size(); ++r) {
    out.push_back(labels[r]);
    for (int p = 0; p < 3072; ++p) out.push_back((r * 3 + p) % 256);
  }
  return out;
}

absl::Status LoadError(const std::string& dir) {
  return LoadCifar10(dir, true, 0).status();
}

TEST(Cifar10, LoadsWhicheverTrainingBatchesExist) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/data_batch_1.bin", Records({6, 9}));
  WriteFile(dir + "/data_batch_3.bin", Records({1, 2, 3}));
  WriteFile(dir + "/test_batch.bin", Records({8}));
  absl::StatusOr<DataSplits> splits = LoadCifar10(dir, true, 0);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const Dataset& train = *splits->train;
  ASSERT_EQ(train.size(), 5);
  EXPECT_EQ(train.sample_shape(), (Shape{3, 32, 32}));
  EXPECT_EQ(splits->test->size(), 1);
  std::vector<float> x(3072);
  EXPECT_EQ(LabelOf(train, 1, x.data()), 9);
  EXPECT_EQ(LabelOf(train, 3, x.data()), 2);  // record 1 of data_batch_3
  // Record 1 of its file: byte p is (3 + p) % 256; channel = p / 1024.
  EXPECT_NEAR(x[0], (3 / 255.0f - kCifar10Means[0]) / kCifar10Stds[0], 1e-5);
  EXPECT_NEAR(x[1024],
              ((1027 % 256) / 255.0f - kCifar10Means[1]) / kCifar10Stds[1],
              1e-5);
  EXPECT_NEAR(x[2050],
              ((2053 % 256) / 255.0f - kCifar10Means[2]) / kCifar10Stds[2],
              1e-5);
  EXPECT_EQ(LabelOf(*splits->test, 0, x.data()), 8);
}

TEST(Cifar10, FindsTheArchiveSubdirectoryAndAppliesOptions) {
  const std::string dir = MakeTempDir();
  const std::string sub = dir + "/cifar-10-batches-bin";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  WriteFile(sub + "/data_batch_2.bin", Records({0, 1, 2, 3}));
  WriteFile(sub + "/test_batch.bin", Records({4}));
  absl::StatusOr<DataSplits> splits = LoadCifar10(dir, false, 2);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 2);
  std::vector<float> x(3072);
  EXPECT_EQ(LabelOf(*splits->train, 1, x.data()), 1);
  EXPECT_FLOAT_EQ(x[1], 4 / 255.0f);
}

TEST(Cifar10, NoFilesAtAll) {
  const std::string dir = MakeTempDir();
  absl::Status s = LoadError(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("data_batch_1.bin..data_batch_5.bin and "
                        "test_batch.bin in " +
                        dir + " and " + dir + "/cifar-10-batches-bin"));
}

TEST(Cifar10, NoTrainingBatches) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/test_batch.bin", Records({4}));
  absl::Status s = LoadError(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no CIFAR-10 training files found: looked "
                                     "for data_batch_1.bin..data_batch_5.bin "
                                     "in " +
                                     dir));
}

TEST(Cifar10, MissingTestBatch) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/data_batch_1.bin", Records({4}));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("looked for " + dir + "/test_batch.bin"));
}

TEST(Cifar10, SizeMustBeAMultipleOfTheRecord) {
  const std::string dir = MakeTempDir();
  std::vector<uint8_t> bytes = Records({1, 2});
  bytes.pop_back();
  WriteFile(dir + "/data_batch_1.bin", bytes);
  WriteFile(dir + "/test_batch.bin", Records({4}));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("data_batch_1.bin is 6145 bytes long, expected a "
                        "non-zero multiple of 3073"));
  WriteFile(dir + "/data_batch_1.bin", {});
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("data_batch_1.bin is 0 bytes long"));
}

TEST(Cifar10, LabelOutOfRange) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/data_batch_1.bin", Records({1, 2}));
  WriteFile(dir + "/test_batch.bin", Records({0, 0, 11}));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("test_batch.bin: label 11 of record 2 is out of "
                        "range, expected 0..9"));
}

TEST(Cifar10, RealSubset) {
  const std::string data = FindTestDataDir();
  const std::string dir = data + "/cifar10-subset";
  if (data.empty() ||
      !FileExists(dir + "/cifar-10-batches-bin/data_batch_1.bin")) {
    GTEST_SKIP() << MissingDataMessage("CIFAR-10 (cifar10-subset/)");
  }
  absl::StatusOr<DataSplits> splits = LoadCifar10(dir, true, 0);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 4000);
  EXPECT_EQ(splits->test->size(), 1000);
  std::vector<float> x(3072);
  // The first records of the original batches: frog, truck, truck / cat,
  // ship, ship.
  EXPECT_EQ(LabelOf(*splits->train, 0, x.data()), 6);
  EXPECT_EQ(LabelOf(*splits->train, 1, x.data()), 9);
  EXPECT_EQ(LabelOf(*splits->train, 2, x.data()), 9);
  EXPECT_EQ(LabelOf(*splits->test, 0, x.data()), 3);
  EXPECT_EQ(LabelOf(*splits->test, 1, x.data()), 8);
  EXPECT_EQ(LabelOf(*splits->test, 2, x.data()), 8);
  std::vector<int> counts(10, 0);
  for (int64_t i = 0; i < splits->train->size(); ++i) {
    ++counts[LabelOf(*splits->train, i, x.data())];
  }
  for (int c = 0; c < 10; ++c) EXPECT_GT(counts[c], 300) << "class " << c;
}

}  // namespace
}  // namespace cohort
