#include "worker/exchange/replica_sum.h"

#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ReplicaSum, SumsTheRangeOnlyAndScales) {
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40},
                     c = {100, 200, 300, 400};
  SumReplicasInto({a.data(), b.data(), c.data()}, 3, 1, 3, 0.5f);
  EXPECT_EQ(a, (std::vector<float>{1, 111, 166.5f, 4}));
  EXPECT_EQ(b, (std::vector<float>{10, 20, 30, 40}));
}

TEST(ReplicaSum, CountLimitsTheReplicasAndOneIsANoOp) {
  std::vector<float> a = {1, 2}, b = {10, 20}, c = {100, 200};
  SumReplicasInto({a.data(), b.data(), c.data()}, 2, 0, 2, 1.0f);
  EXPECT_EQ(a, (std::vector<float>{11, 22}));
  SumReplicasInto({a.data(), b.data()}, 1, 0, 2, 1.0f);
  EXPECT_EQ(a, (std::vector<float>{11, 22}));
  SumReplicasInto({a.data(), b.data()}, 2, 2, 2, 0.5f);  // empty range
  EXPECT_EQ(a, (std::vector<float>{11, 22}));
}

}  // namespace
}  // namespace cohort
