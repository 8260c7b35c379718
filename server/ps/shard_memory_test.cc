#include "server/ps/shard_memory.h"

#include <string>

#include "common/spec.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

JobSpec PsJob(int out_features, const std::string& extra = "") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "model { layers { flatten {} } layers { linear { out_features: " +
          std::to_string(out_features) +
          " } } }\n"
          "data { synthetic { shape: [1, 28, 28] } }\n"
          "batch_size: 8\nepochs: 1\nmode: PS\n"
          "optimizer { lr: 0.1 momentum: 0.9 }\n" +
          extra,
      "ps.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

TEST(ShardMemory, ASmallModelFits) {
  EXPECT_TRUE(CheckShardMemory(PsJob(10), 0, 1, int64_t{1} << 30).ok());
  EXPECT_TRUE(CheckShardMemory(PsJob(10), 0, 1).ok());  // this machine
}

// 784 x 10^8 + 10^8 parameters, SGD with momentum under SYNC: values, a
// push buffer, the gradient sum and the momentum, 16 bytes a parameter.
TEST(ShardMemory, RefusesASliceThatDoesNotFit) {
  const absl::Status s =
      CheckShardMemory(PsJob(100000000), 0, 1, int64_t{1} << 30);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(s.message())
                .rfind("its 78500000000 of the job's 78500000000 parameters "
                       "need 1.1 TiB",
                       0),
            0u)
      << s;
  EXPECT_NE(s.message().find("(values, a push buffer, the step's gradient "
                             "sum, momentum); shard 0 of 1 needs 1.1 TiB in "
                             "all and this machine has 1.0 GiB available"),
            std::string::npos)
      << s;
}

// Spread over shards, each holds about its share: 10^7 outputs are 7.85e9
// parameters, 29 GiB a shard of 4 but 117 GiB for one.
TEST(ShardMemory, MoreShardsHoldLessEach) {
  const JobSpec job = PsJob(10000000, "ps { shards: 4 }\n");
  const int64_t budget = int64_t{40} << 30;
  EXPECT_TRUE(CheckShardMemory(job, 3, 4, budget).ok());
  EXPECT_FALSE(CheckShardMemory(job, 0, 1, budget).ok());
}

}  // namespace
}  // namespace cohort
