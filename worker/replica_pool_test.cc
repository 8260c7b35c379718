#include "worker/replica_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ReplicaPool, RunsEveryReplicaOncePerRound) {
  for (int replicas : {1, 2, 4}) {
    ReplicaPool pool(replicas);
    std::vector<std::atomic<int>> hits(replicas);
    for (int round = 0; round < 1000; ++round) {
      pool.Run([&](int r) { hits[r].fetch_add(1); });
      for (int r = 0; r < replicas; ++r) ASSERT_EQ(hits[r].load(), round + 1);
    }
  }
}

TEST(ReplicaPool, RoundsDoNotOverlap) {
  ReplicaPool pool(3);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  for (int round = 0; round < 200; ++round) {
    pool.Run([&](int) {
      int now = inside.fetch_add(1) + 1;
      int seen = max_inside.load();
      while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
      }
      inside.fetch_sub(1);
    });
    EXPECT_EQ(inside.load(), 0);
  }
  EXPECT_LE(max_inside.load(), 3);
}

}  // namespace
}  // namespace cohort
