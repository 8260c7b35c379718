#include "worker/data/synthetic.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

SyntheticOptions Small(uint64_t seed) {
  SyntheticOptions o;
  o.shape = {3, 4, 4};
  o.num_classes = 5;
  o.train_samples = 600;
  o.test_samples = 300;
  o.seed = seed;
  return o;
}

std::vector<float> Sample(const Dataset& d, int64_t i, int32_t* label) {
  std::vector<float> x(NumElements(d.sample_shape()));
  *label = LabelOf(d, i, x.data());
  return x;
}

TEST(Synthetic, DefaultsMatchTheSpecAndGenerationIsFast) {
  absl::StatusOr<SyntheticOptions> o =
      SyntheticOptionsFromSpec(SyntheticSpec(), 77);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shape, (Shape{1, 28, 28}));
  EXPECT_EQ(o->num_classes, 10);
  EXPECT_EQ(o->seed, 77u);
  const auto start = std::chrono::steady_clock::now();
  DataSplits splits = MakeSyntheticSplits(*o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("generated 8192 + 2048 samples of 784 in %.3f s\n", seconds);
  EXPECT_LT(seconds, 2.0);  // target: well under 0.5 s; loose for busy hosts
  EXPECT_EQ(splits.train->size(), 8192);
  EXPECT_EQ(splits.test->size(), 2048);
  EXPECT_EQ(splits.train->num_classes(), 10);
}

TEST(Synthetic, SamplesAreAFunctionOfSeedSplitAndIndex) {
  SyntheticDataset a(Small(1), SyntheticDataset::Split::kTrain);
  SyntheticDataset b(Small(1), SyntheticDataset::Split::kTrain);
  SyntheticDataset other_seed(Small(2), SyntheticDataset::Split::kTrain);
  SyntheticDataset test(Small(1), SyntheticDataset::Split::kTest);
  int32_t la, lb, lc, ld;
  for (int64_t i : {0, 17, 299}) {
    std::vector<float> xa = Sample(a, i, &la);
    EXPECT_EQ(xa, Sample(b, i, &lb));
    EXPECT_EQ(la, lb);
    EXPECT_NE(xa, Sample(other_seed, i, &lc));
    EXPECT_NE(xa, Sample(test, i, &ld));
  }
}

TEST(Synthetic, LazyGenerationEqualsMaterialised) {
  SyntheticOptions big = Small(5);
  big.shape = {1000000};  // 1000 samples of 4 MB exceed the cache limit
  big.train_samples = 1000;
  SyntheticOptions small = big;
  small.train_samples = 3;
  SyntheticDataset lazy(big, SyntheticDataset::Split::kTrain);
  SyntheticDataset cached(small, SyntheticDataset::Split::kTrain);
  EXPECT_FALSE(lazy.materialized());
  EXPECT_TRUE(cached.materialized());
  int32_t l1, l2;
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(Sample(lazy, i, &l1), Sample(cached, i, &l2));
    EXPECT_EQ(l1, l2);
  }
}

// Nearest class mean (estimated on train) must classify test samples far
// above chance, and the class means must sit about sqrt(2 F) apart.
TEST(Synthetic, ClassesAreLearnable) {
  SyntheticOptions o = Small(9);
  o.noise = 2.0f;
  DataSplits s = MakeSyntheticSplits(o);
  const int64_t f = 48;
  std::vector<std::vector<double>> mean(5, std::vector<double>(f, 0.0));
  std::vector<int> count(5, 0);
  double sum_sq = 0;
  for (int64_t i = 0; i < s.train->size(); ++i) {
    int32_t label;
    std::vector<float> x = Sample(*s.train, i, &label);
    ASSERT_TRUE(label >= 0 && label < 5);
    ++count[label];
    for (int64_t j = 0; j < f; ++j) {
      mean[label][j] += x[j];
      sum_sq += x[j] * x[j];
    }
  }
  // Each element is N(0, 1) + 2 N(0, 1): variance 5.
  EXPECT_NEAR(sum_sq / (s.train->size() * f), 5.0, 0.5);
  for (int c = 0; c < 5; ++c) {
    EXPECT_GT(count[c], 80) << "labels are not uniform";
    for (double& m : mean[c]) m /= count[c];
  }
  for (int c = 1; c < 5; ++c) {
    double d2 = 0;
    for (int64_t j = 0; j < f; ++j) d2 += std::pow(mean[c][j] - mean[0][j], 2);
    EXPECT_GT(std::sqrt(d2), 4.0) << "class " << c;
  }
  int correct = 0;
  for (int64_t i = 0; i < s.test->size(); ++i) {
    int32_t label;
    std::vector<float> x = Sample(*s.test, i, &label);
    int best = 0;
    double best_d2 = 1e30;
    for (int c = 0; c < 5; ++c) {
      double d2 = 0;
      for (int64_t j = 0; j < f; ++j) d2 += std::pow(x[j] - mean[c][j], 2);
      if (d2 < best_d2) best_d2 = d2, best = c;
    }
    correct += best == label;
  }
  EXPECT_GT(correct, 0.8 * s.test->size());
}

TEST(Synthetic, SpecErrorsNameTheField) {
  SyntheticSpec spec;
  spec.add_shape(3);
  spec.add_shape(0);
  EXPECT_THAT(SyntheticOptionsFromSpec(spec, 1).status().message(),
              HasSubstr("data.synthetic.shape[1] is 0, expected 1 to"));
  spec.clear_shape();
  for (int i = 0; i < 4; ++i) spec.add_shape(2);
  EXPECT_THAT(
      SyntheticOptionsFromSpec(spec, 1).status().message(),
      HasSubstr("data.synthetic.shape has 4 dimensions, expected 1 to 3"));
  spec.clear_shape();
  spec.set_classes(1);
  EXPECT_THAT(SyntheticOptionsFromSpec(spec, 1).status().message(),
              HasSubstr("data.synthetic.classes is 1, expected at least 2"));
  spec.set_classes(3);
  spec.set_train_samples(-5);
  EXPECT_THAT(SyntheticOptionsFromSpec(spec, 1).status().message(),
              HasSubstr("data.synthetic.train_samples is -5"));
  spec.set_train_samples(10);
  spec.set_noise(-1);
  EXPECT_THAT(SyntheticOptionsFromSpec(spec, 1).status().message(),
              HasSubstr("data.synthetic.noise is -1"));
  spec.set_noise(0.5);
  spec.set_seed(42);
  spec.add_shape(100);
  absl::StatusOr<SyntheticOptions> o = SyntheticOptionsFromSpec(spec, 1);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shape, (Shape{100}));
  EXPECT_EQ(o->num_classes, 3);
  EXPECT_EQ(o->train_samples, 10);
  EXPECT_EQ(o->test_samples, 2048);
  EXPECT_FLOAT_EQ(o->noise, 0.5f);
  EXPECT_EQ(o->seed, 42u);
}

}  // namespace
}  // namespace cohort
