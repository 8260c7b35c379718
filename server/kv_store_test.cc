// KvStore on its own: generations, abort, limits, overflow, cancellation.
#include "server/kv_store.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(KvStore, RefusesCallsBeforeTheFirstGeneration) {
  KvStore kv;
  const absl::Status s = kv.Set(1, "k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "generation 1 does not exist: the job is still forming");
}

TEST(KvStore, NewGenerationClearsKeysAndRefusesTheOldOne) {
  KvStore kv;
  kv.StartGeneration(1);
  ASSERT_TRUE(kv.Set(1, "k", "v").ok());
  kv.StartGeneration(2);
  EXPECT_EQ(kv.Get(1, "k").status().message(),
            "stale generation 1, current is 2");
  const absl::StatusOr<std::optional<std::string>> got = kv.Get(2, "k");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST(KvStore, AbortFailsEveryCallUntilTheNextGeneration) {
  KvStore kv;
  kv.StartGeneration(1);
  kv.Abort(absl::AbortedError("the job is FAILED: x"));
  kv.Abort(absl::UnavailableError("later"));  // the first reason wins
  EXPECT_EQ(kv.Set(1, "k", "v").message(), "the job is FAILED: x");
  EXPECT_EQ(kv.Add(1, "n", 1).status().code(), absl::StatusCode::kAborted);
  kv.StartGeneration(2);
  EXPECT_TRUE(kv.Set(2, "k", "v").ok());
}

TEST(KvStore, AbortWakesABlockedWait) {
  KvStore kv;
  kv.StartGeneration(1);
  absl::Status s;
  std::thread waiter(
      [&] { s = kv.Wait(1, {"never"}, absl::Seconds(30), nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  kv.Abort(absl::UnavailableError("the coordinator is shutting down"));
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

TEST(KvStore, WaitNoticesACancelledCaller) {
  KvStore kv;
  kv.StartGeneration(1);
  std::atomic<bool> gone{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gone = true;
  });
  const absl::Status s =
      kv.Wait(1, {"never"}, absl::Seconds(30), [&] { return gone.load(); });
  canceller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
}

TEST(KvStore, WaitTimeoutNamesAtMostTenKeys) {
  KvStore kv;
  kv.StartGeneration(1);
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) keys.push_back("k" + std::to_string(i));
  const absl::Status s = kv.Wait(1, keys, absl::ZeroDuration(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("12 of 12 keys missing: \"k0\""),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("\"k9\" and 2 more"), std::string::npos) << s;
}

TEST(KvStore, AddDetectsOverflowAndNonIntegers) {
  KvStore kv;
  kv.StartGeneration(1);
  EXPECT_EQ(*kv.Add(1, "n", -7), -7);
  EXPECT_EQ(*kv.Add(1, "n", 10), 3);
  ASSERT_TRUE(kv.Set(1, "max", "9223372036854775807").ok());
  EXPECT_EQ(kv.Add(1, "max", 1).status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(kv.Set(1, "s", "12abc").ok());
  EXPECT_EQ(kv.Add(1, "s", 1).status().message(),
            "KvAdd: key \"s\" holds \"12abc\", which is not a decimal int64");
}

TEST(KvStore, TotalSizeIsBounded) {
  KvStore kv(1000);
  kv.StartGeneration(1);
  const std::string value(300, 'v');  // 302 bytes with its key
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(kv.Set(1, "k" + std::to_string(i), value).ok());
  }
  // Overwriting a key counts only the difference.
  EXPECT_TRUE(kv.Set(1, "k0", value).ok());
  const absl::Status s = kv.Set(1, "k3", value);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "setting key \"k3\" (300 bytes) would take the KV store past its "
            "limit of 1000 bytes");
  EXPECT_TRUE(kv.Set(1, "k3", "small").ok());
}

}  // namespace
}  // namespace cohort
