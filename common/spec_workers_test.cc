#include "common/spec_workers.h"

#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

ClusterSpec Cluster(int min, int max) {
  ClusterSpec c;
  c.set_min_workers(min);
  c.set_max_workers(max);
  return c;
}

WorkerCountFlags Flags(int64_t workers, int64_t min, int64_t max) {
  WorkerCountFlags f;
  f.workers = workers;
  f.min_workers = min;
  f.max_workers = max;
  return f;
}

// The counts after the flags, "min..max", or the error.
std::string Apply(WorkerCountFlags f, ClusterSpec c) {
  const absl::Status s = ApplyWorkerCounts(f, &c);
  if (!s.ok()) return std::string(s.message());
  return std::to_string(c.min_workers()) + ".." +
         std::to_string(c.max_workers());
}

TEST(ApplyWorkerCounts, FlagsWinOverTheSpec) {
  EXPECT_EQ(Apply(Flags(0, 0, 0), Cluster(1, 1)), "1..1");
  EXPECT_EQ(Apply(Flags(0, 0, 0), Cluster(2, 4)), "2..4");
  EXPECT_EQ(Apply(Flags(2, 0, 0), Cluster(1, 1)), "2..2");
  EXPECT_EQ(Apply(Flags(2, 0, 0), Cluster(3, 8)), "2..2");
  EXPECT_EQ(Apply(Flags(0, 2, 4), Cluster(1, 1)), "2..4");
  EXPECT_EQ(Apply(Flags(0, 0, 4), Cluster(2, 2)), "2..4");
}

TEST(ApplyWorkerCounts, MinimumRaisesAMaximumThatFollowedIt) {
  // No cluster section: the maximum is the minimum's default.
  EXPECT_EQ(Apply(Flags(0, 3, 0), Cluster(1, 1)), "3..3");
  EXPECT_EQ(Apply(Flags(0, 2, 0), Cluster(1, 4)), "2..4");
  EXPECT_EQ(Apply(Flags(0, 5, 0), Cluster(1, 4)),
            "--min-workers=5 is more than the spec's cluster.max_workers "
            "(4): give --max-workers too");
}

TEST(ApplyWorkerCounts, InconsistentFlagsAreNamed) {
  EXPECT_EQ(Apply(Flags(2, 0, 3), Cluster(1, 1)),
            "--workers=N sets both the minimum and the maximum: give it "
            "alone, or --min-workers and --max-workers");
  EXPECT_EQ(Apply(Flags(0, 3, 2), Cluster(1, 1)),
            "--min-workers=3 is more than --max-workers=2");
  EXPECT_EQ(Apply(Flags(0, 0, 1), Cluster(2, 2)),
            "--max-workers=1 is less than the spec's cluster.min_workers (2): "
            "give --min-workers too");
  EXPECT_EQ(Apply(Flags(5000, 0, 0), Cluster(1, 1)),
            "--workers must be an integer in [1, 4096], got 5000");
}

TEST(DescribeWorkerCounts, SaysHowMany) {
  EXPECT_EQ(DescribeWorkerCounts(Cluster(1, 1)), "1 worker");
  EXPECT_EQ(DescribeWorkerCounts(Cluster(2, 2)), "2 workers");
  EXPECT_EQ(DescribeWorkerCounts(Cluster(2, 4)), "2..4 workers");
  EXPECT_TRUE(HasDefaultWorkerCounts(Cluster(1, 1)));
  EXPECT_FALSE(HasDefaultWorkerCounts(Cluster(1, 2)));
}

}  // namespace
}  // namespace cohort
