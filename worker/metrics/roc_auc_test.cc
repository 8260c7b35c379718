#include "worker/metrics/roc_auc.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

double Auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  absl::StatusOr<double> auc = RocAuc(scores, labels);
  EXPECT_TRUE(auc.ok()) << auc.status();
  return auc.value_or(-1);
}

// The definition, pair by pair: O(P N), counted in halves like RocAuc so
// that both round the same integer once.
double BruteForceAuc(const std::vector<float>& scores,
                     const std::vector<float>& labels) {
  uint64_t twice = 0, positives = 0, negatives = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] >= 0.5f) {
      ++positives;
    } else {
      ++negatives;
    }
    if (labels[i] < 0.5f) continue;
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] >= 0.5f) continue;
      twice += scores[i] > scores[j] ? 2 : scores[i] == scores[j] ? 1 : 0;
    }
  }
  return static_cast<double>(twice) /
         (2 * static_cast<double>(positives) * static_cast<double>(negatives));
}

TEST(RocAuc, MatchesHandComputedCases) {
  // sklearn's documented example: 3 of the 4 pairs are ordered right.
  EXPECT_EQ(Auc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
  EXPECT_EQ(Auc({-2, -1, 1, 2}, {0, 0, 1, 1}), 1.0);
  EXPECT_EQ(Auc({2, 1, -1, -2}, {0, 0, 1, 1}), 0.0);
}

TEST(RocAuc, CountsTiesAsHalf) {
  EXPECT_EQ(Auc({0.5f, 0.5f}, {0, 1}), 0.5);
  EXPECT_EQ(Auc({3, 3, 3, 3}, {1, 0, 1, 0}), 0.5);
  // Positives {1, 2}, negatives {1, 0}: a tie (1/2) and three wins.
  EXPECT_EQ(Auc({1, 1, 2, 0}, {1, 0, 1, 0}), 3.5 / 4);
  // Signed zeros are one score.
  EXPECT_EQ(Auc({-0.0f, 0.0f}, {1, 0}), 0.5);
}

TEST(RocAuc, TreatsLabelsFromOneHalfAsPositive) {
  EXPECT_EQ(Auc({0, 1}, {0.49f, 0.5f}), 1.0);
}

TEST(RocAuc, DoesNotDependOnTheOrderOfTheSamples) {
  const std::vector<float> s = {0.3f, -1, 2, 0.3f, 5, -1},
                           y = {1, 0, 1, 0, 0, 1};
  const std::vector<float> s2 = {5, -1, 0.3f, 2, -1, 0.3f},
                           y2 = {0, 1, 0, 1, 0, 1};
  EXPECT_EQ(Auc(s, y), Auc(s2, y2));
}

TEST(RocAuc, RefusesLabelsOfOneClass) {
  for (const std::vector<float>& labels :
       {std::vector<float>{1, 1, 1}, std::vector<float>{0, 0, 0}}) {
    const absl::StatusOr<double> auc = RocAuc({0.1f, 0.2f, 0.3f}, labels);
    ASSERT_FALSE(auc.ok());
    EXPECT_EQ(auc.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(
        auc.status().message().find(labels[0] > 0 ? "positive" : "negative"),
        absl::string_view::npos)
        << auc.status();
  }
  EXPECT_FALSE(RocAuc({}, {}).ok());
}

TEST(RocAuc, RefusesScoresAndLabelsOfDifferentLengths) {
  const absl::StatusOr<double> auc = RocAuc({0.1f, 0.2f}, {1});
  EXPECT_EQ(auc.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RocAuc, IsNanWhenAScoreIsNan) {
  const absl::StatusOr<double> auc = RocAuc({0.1f, std::nanf("")}, {1, 0});
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_TRUE(std::isnan(*auc));
}

TEST(RocAuc, InfiniteScoresOrderLikeAnyOther) {
  const float inf = INFINITY;
  EXPECT_EQ(Auc({-inf, inf, inf}, {0, 1, 0}), 0.75);
}

// Random data sets, some drawn from a few values (many ties), some from a
// continuum, against the pairwise definition: equal to the last bit.
TEST(RocAuc, EqualsThePairwiseCountOnRandomData) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 300);
    const bool few_values = trial % 2 == 0;
    const double rate = 0.05 + 0.9 * (rng() % 1000) / 1000.0;
    std::bernoulli_distribution positive(rate);
    std::uniform_int_distribution<int> level(0, 7);
    std::normal_distribution<float> normal(0, 3);
    std::vector<float> scores(n), labels(n);
    for (int i = 0; i < n; ++i) {
      labels[i] = positive(rng) ? 1 : 0;
      scores[i] =
          few_values ? static_cast<float>(level(rng)) : normal(rng) + labels[i];
    }
    labels[0] = 1;  // both classes present
    labels[1] = 0;
    EXPECT_EQ(Auc(scores, labels), BruteForceAuc(scores, labels))
        << "trial " << trial << ", " << n << " samples";
  }
}

}  // namespace
}  // namespace cohort
