#include "worker/metrics/normalized_entropy.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace cohort {
namespace {

double Entropy(double p) {
  return -(p * std::log(p) + (1 - p) * std::log(1 - p));
}

TEST(NormalizedEntropy, IsOneForThePredictionOfTheBaseRate) {
  // Predicting p for every sample costs H(p) per sample on average.
  for (double p : {0.5, 0.25, 0.03, 0.97}) {
    const absl::StatusOr<double> ne = NormalizedEntropy(Entropy(p), p);
    ASSERT_TRUE(ne.ok()) << ne.status();
    EXPECT_NEAR(*ne, 1.0, 1e-12) << "p " << p;
  }
}

TEST(NormalizedEntropy, DividesTheMeanLossByTheEntropyOfTheRate) {
  const absl::StatusOr<double> ne = NormalizedEntropy(0.3, 0.5);
  ASSERT_TRUE(ne.ok()) << ne.status();
  EXPECT_NEAR(*ne, 0.3 / std::log(2.0), 1e-12);
  EXPECT_EQ(NormalizedEntropy(0, 0.2).value_or(-1), 0);
}

TEST(NormalizedEntropy, RefusesARateWithoutBothClasses) {
  for (double p :
       {0.0, 1.0, -0.5, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    const absl::StatusOr<double> ne = NormalizedEntropy(0.5, p);
    ASSERT_FALSE(ne.ok()) << "p " << p;
    EXPECT_EQ(ne.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(ne.status().message().find("positive and negative"),
              absl::string_view::npos)
        << ne.status();
  }
}

}  // namespace
}  // namespace cohort
