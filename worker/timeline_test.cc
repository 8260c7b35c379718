#include "worker/timeline.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

TEST(Timeline, CompleteEventsWithLanesAndArguments) {
  Timeline t(3, "worker rank 3");
  const absl::Time start = absl::FromUnixMicros(1'000'000);
  t.Add("forward", 0, start, start + absl::Microseconds(250));
  t.Add("allreduce", Timeline::kBucketLane + 1, start,
        start + absl::Milliseconds(2), "\"bytes\": 4096");
  // An end before the start (clock trouble) gives a zero duration.
  t.Add("optimizer", Timeline::kStepLane, start, start - absl::Seconds(1));
  const std::string json = t.ToJson();
  EXPECT_NE(json.find("\"name\": \"forward\", \"pid\": 3, \"tid\": 0, "
                      "\"ts\": 1000000, \"dur\": 250"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"dur\": 2000, \"args\": {\"bytes\": 4096}"),
            std::string::npos);
  EXPECT_NE(json.find("\"name\": \"optimizer\", \"pid\": 3, \"tid\": 100, "
                      "\"ts\": 1000000, \"dur\": 0"),
            std::string::npos);
  EXPECT_NE(json.find("{\"name\": \"worker rank 3\"}"), std::string::npos);
  EXPECT_NE(json.find("{\"name\": \"communication 1\"}"), std::string::npos);
  EXPECT_EQ(Count(json, "\"ph\": \"X\""), 3);
  EXPECT_EQ(Count(json, "\"ph\": \"M\""), 4);  // process + 3 lanes
}

TEST(Timeline, NamesAreEscapedAndProcessRelabelled) {
  Timeline t(0, "worker");
  t.SetProcess(2, "worker \"b\"");
  t.Add("a\"b", 0, absl::Now(), absl::Now());
  const std::string json = t.ToJson();
  EXPECT_NE(json.find("\"a\\\"b\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"worker \\\"b\\\"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pid\": 2"), std::string::npos);
}

TEST(Timeline, ConcurrentAddsAreAllKept) {
  Timeline t(0, "worker");
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&t, k] {
      for (int i = 0; i < 1000; ++i) t.Add("x", k, absl::Now(), absl::Now());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 4000);
}

TEST(Timeline, WriteFailsNamingAnUnwritablePath) {
  Timeline t(0, "worker");
  absl::Status s = t.Write("/nonexistent-dir/trace.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("/nonexistent-dir"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace cohort
