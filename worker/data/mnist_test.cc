#include "worker/data/mnist.h"

#include <chrono>
#include <cmath>
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

void PutBigEndian32(uint32_t v, std::vector<uint8_t>* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(v >> shift);
}

// An IDX images file of `n` images (pixel value = (image + pixel) % 256),
// whose header claims `claimed` images (default n).
std::vector<uint8_t> Images(uint32_t n, uint32_t rows = 28, uint32_t cols = 28,
                            uint32_t magic = 0x803, int64_t claimed = -1) {
  std::vector<uint8_t> out;
  PutBigEndian32(magic, &out);
  PutBigEndian32(claimed >= 0 ? claimed : n, &out);
  PutBigEndian32(rows, &out);
  PutBigEndian32(cols, &out);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p = 0; p < rows * cols; ++p) out.push_back((i + p) % 256);
  }
  return out;
}

std::vector<uint8_t> Labels(const std::vector<uint8_t>& labels,
                            uint32_t magic = 0x801) {
  std::vector<uint8_t> out;
  PutBigEndian32(magic, &out);
  PutBigEndian32(labels.size(), &out);
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// A valid fake MNIST directory: raw train files, gzipped test files.
std::string FakeMnistDir() {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/train-images-idx3-ubyte", Images(5));
  WriteFile(dir + "/train-labels-idx1-ubyte", Labels({3, 1, 4, 1, 5}));
  WriteFile(dir + "/t10k-images-idx3-ubyte.gz", GzipBytes(Images(2)));
  WriteFile(dir + "/t10k-labels-idx1-ubyte.gz", GzipBytes(Labels({9, 0})));
  return dir;
}

absl::Status LoadError(const std::string& dir) {
  return LoadMnist(dir, true, 0).status();
}

TEST(Mnist, LoadsFakeRawAndGzippedFiles) {
  absl::StatusOr<DataSplits> splits = LoadMnist(FakeMnistDir(), true, 0);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const Dataset& train = *splits->train;
  ASSERT_EQ(train.size(), 5);
  EXPECT_EQ(train.sample_shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(train.num_classes(), 10);
  EXPECT_EQ(splits->test->size(), 2);
  std::vector<float> x(784);
  EXPECT_EQ(LabelOf(train, 2, x.data()), 4);
  // Pixel p of image 2 is (2 + p) % 256.
  EXPECT_NEAR(x[0], (2 / 255.0f - kMnistMean) / kMnistStd, 1e-5);
  EXPECT_NEAR(x[300], ((302 % 256) / 255.0f - kMnistMean) / kMnistStd, 1e-5);
  EXPECT_EQ(LabelOf(*splits->test, 0, x.data()), 9);
  EXPECT_NEAR(x[10], (10 / 255.0f - kMnistMean) / kMnistStd, 1e-5);
}

TEST(Mnist, NoNormalizeScalesToUnitRangeAndTrainLimitTruncates) {
  absl::StatusOr<DataSplits> splits = LoadMnist(FakeMnistDir(), false, 3);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train->size(), 3);
  EXPECT_EQ(splits->test->size(), 2);
  std::vector<float> x(784);
  EXPECT_EQ(LabelOf(*splits->train, 1, x.data()), 1);
  EXPECT_FLOAT_EQ(x[254], 255 / 255.0f);
  EXPECT_FLOAT_EQ(x[255], 0.0f);
}

TEST(Mnist, MissingFileListsWhatWasLookedFor) {
  const std::string dir = MakeTempDir();
  absl::Status s = LoadError(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("looked for " + dir +
                                     "/train-images-idx3-ubyte.gz and " + dir +
                                     "/train-images-idx3-ubyte"));
}

TEST(Mnist, BadMagicNumber) {
  const std::string dir = FakeMnistDir();
  WriteFile(dir + "/train-images-idx3-ubyte", Images(5, 28, 28, 0x801));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("train-images-idx3-ubyte has IDX magic number "
                        "0x00000801, expected 0x00000803"));
  WriteFile(dir + "/train-images-idx3-ubyte", Images(5));
  WriteFile(dir + "/train-labels-idx1-ubyte", Labels({1, 2, 3, 4, 5}, 0x803));
  EXPECT_THAT(LoadError(dir).message(), HasSubstr("expected 0x00000801"));
}

TEST(Mnist, DimensionMismatch) {
  const std::string dir = FakeMnistDir();
  WriteFile(dir + "/train-images-idx3-ubyte", Images(5, 32, 32));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("train-images-idx3-ubyte holds 32x32 images, expected "
                        "28x28"));
}

TEST(Mnist, TruncatedFile) {
  const std::string dir = FakeMnistDir();
  WriteFile(dir + "/train-images-idx3-ubyte", Images(4, 28, 28, 0x803, 5));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("train-images-idx3-ubyte is truncated: expected 3936 "
                        "bytes for 5 records, got 3152"));
  WriteFile(dir + "/train-images-idx3-ubyte", {0, 0, 8});
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("expected at least 16 bytes of IDX header, got 3"));
}

TEST(Mnist, CorruptGzip) {
  const std::string dir = FakeMnistDir();
  std::vector<uint8_t> gz = GzipBytes(Images(2));
  for (size_t i = 12; i < gz.size() - 8; ++i) gz[i] ^= 0xa5;
  WriteFile(dir + "/t10k-images-idx3-ubyte.gz", gz);
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("t10k-images-idx3-ubyte.gz has corrupt gzip data"));
}

TEST(Mnist, ImageAndLabelCountsMustMatch) {
  const std::string dir = FakeMnistDir();
  WriteFile(dir + "/train-labels-idx1-ubyte", Labels({1, 2, 3, 4}));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("holds 5 images but " + dir +
                        "/train-labels-idx1-ubyte holds 4 labels"));
}

TEST(Mnist, LabelOutOfRange) {
  const std::string dir = FakeMnistDir();
  WriteFile(dir + "/train-labels-idx1-ubyte", Labels({1, 2, 10, 4, 5}));
  EXPECT_THAT(LoadError(dir).message(),
              HasSubstr("train-labels-idx1-ubyte: label 10 of record 2 is out "
                        "of range, expected 0..9"));
}

TEST(Mnist, RealFiles) {
  const std::string data = FindTestDataDir();
  const std::string dir = data + "/mnist";
  if (data.empty() || !FileExists(dir + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << MissingDataMessage("MNIST (mnist/*.gz)");
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<DataSplits> splits = LoadMnist(dir, true, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_TRUE(splits.ok()) << splits.status();
  std::printf("loaded MNIST (both splits, gzip) in %.3f s\n", seconds);
  EXPECT_LT(seconds, 5.0);  // target: well under 1 s; loose for busy hosts
  ASSERT_EQ(splits->train->size(), 60000);
  ASSERT_EQ(splits->test->size(), 10000);
  std::vector<float> x(784);
  const int32_t train_first[] = {5, 0, 4, 1, 9, 2, 1, 3, 1, 4};
  const int32_t test_first[] = {7, 2, 1, 0, 4, 1, 4, 9, 5, 9};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(LabelOf(*splits->train, i, x.data()), train_first[i]) << i;
    EXPECT_EQ(LabelOf(*splits->test, i, x.data()), test_first[i]) << i;
  }
  // The published constants are the training set's statistics.
  double sum = 0, sum_sq = 0;
  const int64_t n = 2000;
  for (int64_t i = 0; i < n; ++i) {
    LabelOf(*splits->train, i * 30, x.data());
    for (float v : x) {
      sum += v;
      sum_sq += v * v;
    }
  }
  const double mean = sum / (n * 784);
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(std::sqrt(sum_sq / (n * 784) - mean * mean), 1.0, 0.05);
}

}  // namespace
}  // namespace cohort
