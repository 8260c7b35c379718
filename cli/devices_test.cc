#include "cli/devices.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Devices, DefaultIsEveryGpuElseOneCpuReplica) {
  auto none = ParseDevices("", 0, "no driver");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->ToString(), "cpu:1");
  auto two = ParseDevices("", 2, "");
  ASSERT_TRUE(two.ok());
  EXPECT_THAT(two->gpus, ElementsAre(0, 1));
  EXPECT_EQ(two->replicas(), 2);
}

TEST(Devices, ParsesCpuAndGpuLists) {
  EXPECT_EQ(ParseDevices("cpu:4", 2, "")->cpu_replicas, 4);
  EXPECT_THAT(ParseDevices("gpu:all", 3, "")->gpus, ElementsAre(0, 1, 2));
  EXPECT_THAT(ParseDevices("gpu:2,0", 3, "")->gpus, ElementsAre(2, 0));
  EXPECT_EQ(ParseDevices("gpu:2,0", 3, "")->ToString(), "gpu:2,0");
}

TEST(Devices, BadValuesNameTheProblem) {
  struct Case {
    const char* value;
    int gpus;
    const char* mentions;
  };
  for (const Case& c : {
           Case{"cpu:0", 0, "cpu:N"},
           Case{"cpu:257", 0, "cpu:N"},
           Case{"cpu:x", 0, "cpu:N"},
           Case{"tpu:1", 0, "cpu:N"},
           Case{"gpu:all", 0, "no CUDA device (no driver)"},
           Case{"gpu:0", 0, "no CUDA device"},
           Case{"gpu:2", 2, "GPU 2 does not exist"},
           Case{"gpu:-1", 2, "GPU -1 does not exist"},
           Case{"gpu:0,0", 2, "listed twice"},
           Case{"gpu:", 2, "cpu:N"},
           Case{"gpu:0,", 2, "cpu:N"},
       }) {
    auto d = ParseDevices(c.value, c.gpus, "no driver");
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.value;
    EXPECT_THAT(d.status().message(), HasSubstr(c.mentions)) << c.value;
  }
}

TEST(Devices, BothFlagsAreRefused) {
  auto d = ResolveDevices("cpu:1", "cpu:2");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Devices, SplitDealsGpusToWorkers) {
  Devices d;
  d.gpus = {0, 1, 2, 3, 4};
  auto split = SplitDevices(d, 2);
  ASSERT_TRUE(split.ok());
  EXPECT_THAT((*split)[0].gpus, ElementsAre(0, 2, 4));
  EXPECT_THAT((*split)[1].gpus, ElementsAre(1, 3));
  auto too_many = SplitDevices(d, 6);
  EXPECT_THAT(too_many.status().message(), HasSubstr("6 workers but 5 GPUs"));
  Devices cpu;
  cpu.cpu_replicas = 2;
  auto same = SplitDevices(cpu, 3);
  ASSERT_TRUE(same.ok());
  for (const Devices& w : *same) EXPECT_EQ(w.ToString(), "cpu:2");
}

}  // namespace
}  // namespace cohort
