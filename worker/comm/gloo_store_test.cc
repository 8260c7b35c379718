#include "worker/comm/gloo_store.h"

#include <string>
#include <thread>

#include "gloo/common/error.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

std::vector<char> Bytes(const std::string& s) {
  return std::vector<char>(s.begin(), s.end());
}

TEST(KvGlooStore, PrefixesKeysAndRoundTripsBinaryValues) {
  InMemoryKv kv;
  KvGlooStore store(&kv, "gen7/", absl::Seconds(1));
  std::string binary("a\0b\xff", 4);
  store.set("0", Bytes(binary));
  auto raw = kv.Get("gen7/0");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->value_or(""), binary);
  EXPECT_EQ(store.get("0"), Bytes(binary));
}

TEST(KvGlooStore, GetBlocksUntilAnotherRankSetsTheKey) {
  InMemoryKv kv;
  KvGlooStore store(&kv, "g/", absl::Seconds(10));
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    KvGlooStore(&kv, "g/", absl::Seconds(10)).set("1", Bytes("addr"));
  });
  EXPECT_EQ(store.get("1"), Bytes("addr"));
  other.join();
}

TEST(KvGlooStore, TimeoutThrowsNamingMissingRanks) {
  InMemoryKv kv;
  KvGlooStore store(&kv, "g/", absl::Milliseconds(50));
  store.set("0", Bytes("x"));
  try {
    store.wait({"0", "1", "2"});
    FAIL() << "wait did not throw";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1, 2 did not join"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(store.last_error().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(KvGlooStore, KvFailureThrowsIoExceptionAndKeepsTheStatus) {
  InMemoryKv kv;
  kv.InjectError(absl::UnavailableError("coordinator unreachable"));
  KvGlooStore store(&kv, "g/", absl::Seconds(1));
  EXPECT_THROW(store.set("0", Bytes("x")), gloo::IoException);
  EXPECT_EQ(store.last_error().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(store.last_error().message().find("coordinator unreachable"),
            std::string::npos);
  EXPECT_THROW(store.get("0"), gloo::IoException);
}

}  // namespace
}  // namespace cohort
