#include "server/call_limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cohort {
namespace {

CallLimits Limits(int per_peer, int total) {
  CallLimits l;
  l.per_peer = per_peer;
  l.total = total;
  l.what = "blocking calls (Join, KvWait)";
  return l;
}

TEST(CallLimiter, RefusesPastThePerPeerBoundNamingIt) {
  CallLimiter limiter(Limits(2, 100));
  std::vector<CallLimiter::Slot> held;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire("ipv4:10.0.0.1:5");
    ASSERT_TRUE(s.ok()) << s.status();
    held.push_back(*std::move(s));
  }
  absl::StatusOr<CallLimiter::Slot> third = limiter.Acquire("ipv4:10.0.0.1:5");
  ASSERT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "too many concurrent blocking calls (Join, KvWait) from "
            "ipv4:10.0.0.1:5: at most 2 per client connection; retry later");
  // Another connection has its own bound.
  EXPECT_TRUE(limiter.Acquire("ipv4:10.0.0.1:6").ok());
  EXPECT_EQ(limiter.refused(), 1);
}

TEST(CallLimiter, RefusesPastTheTotalNamingIt) {
  CallLimiter limiter(Limits(10, 3));
  std::vector<CallLimiter::Slot> held;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<CallLimiter::Slot> s =
        limiter.Acquire("peer-" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.status();
    held.push_back(*std::move(s));
  }
  absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire("peer-new");
  ASSERT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.status().message(),
            "too many concurrent blocking calls (Join, KvWait): this server "
            "runs at most 3 at once from all clients; retry later");
  EXPECT_EQ(limiter.InFlight(), 3);
}

TEST(CallLimiter, ASlotIsGivenBackWhenDestroyed) {
  CallLimiter limiter(Limits(1, 1));
  {
    absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire("a");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(limiter.InFlight("a"), 1);
    EXPECT_FALSE(limiter.Acquire("a").ok());
    EXPECT_FALSE(limiter.Acquire("b").ok());
  }
  EXPECT_EQ(limiter.InFlight("a"), 0);
  EXPECT_EQ(limiter.InFlight(), 0);
  EXPECT_TRUE(limiter.Acquire("b").ok());
}

TEST(CallLimiter, AMovedSlotIsGivenBackOnce) {
  CallLimiter limiter(Limits(2, 2));
  absl::StatusOr<CallLimiter::Slot> a = limiter.Acquire("p");
  absl::StatusOr<CallLimiter::Slot> b = limiter.Acquire("p");
  ASSERT_TRUE(a.ok() && b.ok());
  {
    CallLimiter::Slot moved = *std::move(a);
    EXPECT_EQ(limiter.InFlight("p"), 2);
    *b = std::move(moved);  // b's own place is given back here
    EXPECT_EQ(limiter.InFlight("p"), 1);
  }
  EXPECT_EQ(limiter.InFlight("p"), 1);
  b = absl::UnknownError("dropped");
  EXPECT_EQ(limiter.InFlight("p"), 0);
  EXPECT_EQ(limiter.InFlight(), 0);
}

// Ordinary calls cannot take the reserved places; a priority call can, and
// so can any call of a connection made a priority peer.
TEST(CallLimiter, KeepsTheReservedShareForPriorityCalls) {
  CallLimits limits = Limits(10, 4);
  limits.reserved = 2;
  CallLimiter limiter(limits);
  std::vector<CallLimiter::Slot> held;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire("flood");
    ASSERT_TRUE(s.ok()) << s.status();
    held.push_back(*std::move(s));
  }
  absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire("flood-2");
  ASSERT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.status().message(),
            "too many concurrent blocking calls (Join, KvWait): this server "
            "runs at most 4 at once from all clients, and keeps 2 of them for "
            "joining workers; retry later");

  s = limiter.Acquire("worker", /*priority=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  held.push_back(*std::move(s));
  limiter.AddPriorityPeer("worker");
  s = limiter.Acquire("worker");
  ASSERT_TRUE(s.ok()) << s.status();
  held.push_back(*std::move(s));
  // The total still bounds priority calls.
  s = limiter.Acquire("worker-2", /*priority=*/true);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.status().message()),
              ::testing::HasSubstr("at most 4 at once from all clients;"));

  // A priority place given back is not taken by an ordinary call.
  held.pop_back();
  EXPECT_FALSE(limiter.Acquire("flood-3").ok());
  held.clear();
  EXPECT_EQ(limiter.InFlight(), 0);
  EXPECT_TRUE(limiter.Acquire("flood-3").ok());
}

// The limiter remembers a bounded number of priority peers, the latest.
TEST(CallLimiter, RemembersTheLatestPriorityPeers) {
  CallLimits limits = Limits(10, 4);
  limits.reserved = 2;
  CallLimiter limiter(limits);
  for (const char* peer : {"w0", "w1", "w2"}) limiter.AddPriorityPeer(peer);
  std::vector<CallLimiter::Slot> held;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire("flood");
    ASSERT_TRUE(s.ok()) << s.status();
    held.push_back(*std::move(s));
  }
  EXPECT_FALSE(limiter.Acquire("w0").ok());  // forgotten
  EXPECT_TRUE(limiter.Acquire("w2").ok());
  EXPECT_TRUE(limiter.Acquire("w1").ok());
}

// Many threads taking and giving back places: the bounds hold at every
// moment and the counts return to zero.
TEST(CallLimiter, HoldsItsBoundsUnderConcurrency) {
  constexpr int kPerPeer = 3, kTotal = 8, kThreads = 16, kRounds = 2000;
  CallLimiter limiter(Limits(kPerPeer, kTotal));
  std::atomic<int> admitted{0}, over{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string peer = "peer-" + std::to_string(t % 4);
      for (int i = 0; i < kRounds; ++i) {
        absl::StatusOr<CallLimiter::Slot> s = limiter.Acquire(peer);
        if (!s.ok()) continue;
        ++admitted;
        if (limiter.InFlight(peer) > kPerPeer || limiter.InFlight() > kTotal) {
          ++over;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(admitted.load() + limiter.refused(), kThreads * kRounds);
  EXPECT_EQ(limiter.InFlight(), 0);
}

}  // namespace
}  // namespace cohort
