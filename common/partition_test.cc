#include "common/partition.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

void ExpectCovers(const std::vector<Partition>& parts, int64_t total) {
  int64_t next = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].id(), static_cast<int>(i));
    EXPECT_EQ(parts[i].offset(), next) << "partition " << i;
    EXPECT_GT(parts[i].count(), 0);
    next += parts[i].count();
  }
  EXPECT_EQ(next, total);
}

TEST(PlanPartitions, GroupsSmallTensorsAndSplitsLargeOnes) {
  // 1 MiB = 262144 floats per partition.
  const std::vector<int64_t> sizes = {10, 20, 30, 1000000, 5, 262144};
  auto parts = PlanPartitions(sizes, 2, 1 << 20);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ExpectCovers(*parts, 10 + 20 + 30 + 1000000 + 5 + 262144);
  ASSERT_EQ(parts->size(), 1u + 4u + 1u + 1u);
  EXPECT_EQ((*parts)[0].count(), 60);  // the three small tensors together
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ((*parts)[i].count(), 250000);  // 1000000 in equal pieces
  }
  EXPECT_EQ((*parts)[5].count(), 5);
  EXPECT_EQ((*parts)[6].count(), 262144);
}

TEST(PlanPartitions, BalancesShardsByBytes) {
  const std::vector<int64_t> sizes(16, 1 << 18);  // 16 x 1 MiB
  auto parts = PlanPartitions(sizes, 3, 1 << 20);
  ASSERT_TRUE(parts.ok());
  std::vector<int64_t> load(3, 0);
  for (const Partition& p : *parts) load[p.shard()] += p.count();
  // 16 equal partitions over 3 shards: 6, 5, 5.
  EXPECT_EQ(load[0], 6 << 18);
  EXPECT_EQ(load[1], 5 << 18);
  EXPECT_EQ(load[2], 5 << 18);
}

TEST(PlanPartitions, IsDeterministic) {
  const std::vector<int64_t> sizes = {7, 300000, 12, 4096, 99999};
  auto a = PlanPartitions(sizes, 2, 256 << 10);
  auto b = PlanPartitions(sizes, 2, 256 << 10);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].SerializeAsString(), (*b)[i].SerializeAsString());
  }
}

TEST(PlanPartitions, RejectsBadInput) {
  EXPECT_FALSE(PlanPartitions({}, 1, 1 << 20).ok());
  EXPECT_FALSE(PlanPartitions({4, 0}, 1, 1 << 20).ok());
  EXPECT_FALSE(PlanPartitions({4}, 0, 1 << 20).ok());
  EXPECT_FALSE(PlanPartitions({4}, 1, 2).ok());
  EXPECT_NE(
      PlanPartitions({4, 0}, 1, 1 << 20).status().message().find("parameter 1"),
      std::string::npos);
}

}  // namespace
}  // namespace cohort
