#include "client/kv_client.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(InMemoryKv, SetThenGetAndAbsentIsNullopt) {
  InMemoryKv kv;
  ASSERT_TRUE(kv.Set("a", "1").ok());
  auto a = kv.Get("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->value_or("<none>"), "1");
  auto b = kv.Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value());
}

TEST(InMemoryKv, WaitReturnsOnceAnotherThreadSetsTheKeys) {
  InMemoryKv kv;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(kv.Set("x", "").ok());
    ASSERT_TRUE(kv.Set("y", "").ok());
  });
  EXPECT_TRUE(kv.Wait({"x", "y"}, absl::Seconds(10)).ok());
  setter.join();
}

TEST(InMemoryKv, WaitTimesOutNamingTheMissingKeys) {
  InMemoryKv kv;
  ASSERT_TRUE(kv.Set("present", "").ok());
  absl::Status status = kv.Wait({"present", "missing"}, absl::Milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("missing"), std::string::npos) << status;
  EXPECT_EQ(status.message().find("present"), std::string::npos) << status;
}

TEST(InMemoryKv, AddCountsFromZeroAndRejectsNonIntegers) {
  InMemoryKv kv;
  EXPECT_EQ(kv.Add("n", 3).value_or(-1), 3);
  EXPECT_EQ(kv.Add("n", -1).value_or(-1), 2);
  ASSERT_TRUE(kv.Set("s", "abc").ok());
  auto bad = kv.Add("s", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'s'"), std::string::npos);
}

TEST(InMemoryKv, InjectedErrorFailsCallsAndWakesWaiters) {
  InMemoryKv kv;
  std::thread injector([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kv.InjectError(absl::UnavailableError("down"));
  });
  auto start = std::chrono::steady_clock::now();
  absl::Status waited = kv.Wait({"never"}, absl::Seconds(10));
  injector.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(kv.Set("a", "b").code(), absl::StatusCode::kUnavailable);
  kv.InjectError(absl::OkStatus());
  EXPECT_TRUE(kv.Set("a", "b").ok());
}

}  // namespace
}  // namespace cohort
