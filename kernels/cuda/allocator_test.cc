#include "kernels/cuda/allocator.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// What the fake backend did; outlives the allocator that owns the backend,
// so tests can check what the destructor returned.
struct Ledger {
  absl::Mutex mu;
  std::set<void*> live;
  std::vector<size_t> requests;  // sizes asked of the backend, in order
  int64_t allocations = 0;
  int64_t frees = 0;
  size_t live_bytes = 0;
  size_t capacity = std::numeric_limits<size_t>::max();
  // When set, every Allocate fails with this instead (not an OOM).
  absl::Status forced_error;
  // Set by Free on a pointer the backend never handed out.
  bool bad_free = false;
};

// malloc-backed, so tests can write into blocks; fails with
// RESOURCE_EXHAUSTED beyond `capacity` live bytes.
class FakeBackend : public AllocatorBackend {
 public:
  explicit FakeBackend(Ledger* ledger) : ledger_(ledger) {}

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    absl::MutexLock lock(&ledger_->mu);
    ledger_->requests.push_back(bytes);
    if (!ledger_->forced_error.ok()) return ledger_->forced_error;
    if (bytes > ledger_->capacity - ledger_->live_bytes) {
      return absl::ResourceExhaustedError("fake device is full");
    }
    void* p = std::malloc(bytes);
    ledger_->live.insert(p);
    ledger_->live_bytes += bytes;
    sizes_[p] = bytes;
    ++ledger_->allocations;
    return p;
  }

  void Free(void* p) override {
    absl::MutexLock lock(&ledger_->mu);
    if (ledger_->live.erase(p) == 0) {
      ledger_->bad_free = true;
      return;
    }
    ledger_->live_bytes -= sizes_[p];
    sizes_.erase(p);
    ++ledger_->frees;
    std::free(p);
  }

 private:
  Ledger* const ledger_;
  std::map<void*, size_t> sizes_;
};

std::unique_ptr<CachingAllocator> MakeAllocator(Ledger* ledger) {
  return std::make_unique<CachingAllocator>(
      std::make_unique<FakeBackend>(ledger), "fake:0");
}

TEST(CachingAllocator, RoundsSmallTo512AndLargeTo2MiB) {
  EXPECT_EQ(CachingAllocator::RoundUp(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundUp(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundUp(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundUp(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundUp(kMiB), kMiB);
  EXPECT_EQ(CachingAllocator::RoundUp(kMiB + 1), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundUp(3 * kMiB), 4 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundUp(std::numeric_limits<size_t>::max()), 0u);
}

TEST(CachingAllocator, AsksTheBackendForRoundedSizes) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  for (size_t bytes : {size_t{1}, size_t{513}, 3 * kMiB}) {
    absl::StatusOr<void*> p = alloc->Allocate(bytes);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(alloc->Free(*p).ok());
  }
  EXPECT_EQ(ledger.requests, (std::vector<size_t>{512, 1024, 4 * kMiB}));
  const AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.bytes_cached, 512u + 1024u + 4 * kMiB);
  EXPECT_EQ(s.blocks_cached, 3u);
}

TEST(CachingAllocator, OverflowingRequestIsResourceExhausted) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  absl::StatusOr<void*> p =
      alloc->Allocate(std::numeric_limits<size_t>::max() - 5);
  EXPECT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
  EXPECT_TRUE(ledger.requests.empty());
}

// A training step allocates the same sizes every time: after the first
// step the backend must not be called again.
TEST(CachingAllocator, SteadyStateReusesWithoutTheBackend) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  const std::vector<size_t> step = {100, 4000, 4000, 3 * kMiB};
  for (int i = 0; i < 50; ++i) {
    std::vector<void*> blocks;
    for (size_t bytes : step) {
      absl::StatusOr<void*> p = alloc->Allocate(bytes);
      ASSERT_TRUE(p.ok()) << p.status();
      blocks.push_back(*p);
    }
    EXPECT_EQ(alloc->stats().bytes_in_use, 512u + 2 * 4096u + 4 * kMiB);
    for (void* p : blocks) ASSERT_TRUE(alloc->Free(p).ok());
  }
  const AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.backend_allocations, 4);
  EXPECT_EQ(ledger.allocations, 4);
  EXPECT_EQ(s.cache_hits, 49 * 4);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(s.blocks_cached, 4u);
}

TEST(CachingAllocator, ReusesOnlyTheSameRoundedSize) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  void* small = *alloc->Allocate(500);
  ASSERT_TRUE(alloc->Free(small).ok());
  void* bigger = *alloc->Allocate(1000);  // 1024: the 512 block won't do
  EXPECT_NE(bigger, small);
  void* same = *alloc->Allocate(300);  // 512 again: the cached block
  EXPECT_EQ(same, small);
  EXPECT_EQ(ledger.allocations, 2);
  EXPECT_EQ(alloc->stats().cache_hits, 1);
  EXPECT_TRUE(alloc->Free(bigger).ok());
  EXPECT_TRUE(alloc->Free(same).ok());
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetries) {
  Ledger ledger;
  ledger.capacity = 4 * kMiB;
  auto alloc = MakeAllocator(&ledger);
  void* big = *alloc->Allocate(3 * kMiB);  // 4 MiB: the whole fake device
  ASSERT_TRUE(alloc->Free(big).ok());      // cached, still held
  absl::StatusOr<void*> small = alloc->Allocate(1000);
  ASSERT_TRUE(small.ok()) << small.status();
  const AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.oom_retries, 1);
  EXPECT_EQ(s.backend_frees, 1);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.bytes_in_use, 1024u);
  EXPECT_EQ(ledger.requests,
            (std::vector<size_t>{4 * kMiB, 1024, 1024}));  // one retry
  EXPECT_TRUE(alloc->Free(*small).ok());
}

TEST(CachingAllocator, OutOfMemoryAfterTheRetryNamesTheRequest) {
  Ledger ledger;
  ledger.capacity = 4 * kMiB + 512;
  auto alloc = MakeAllocator(&ledger);
  void* held = *alloc->Allocate(4 * kMiB);
  void* cached = *alloc->Allocate(0);
  ASSERT_TRUE(alloc->Free(cached).ok());
  absl::StatusOr<void*> p = alloc->Allocate(1000);
  ASSERT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
  const std::string message(p.status().message());
  EXPECT_NE(message.find("fake:0"), std::string::npos) << message;
  EXPECT_NE(message.find("allocating 1000 bytes"), std::string::npos)
      << message;
  EXPECT_NE(message.find("4194304 bytes in use"), std::string::npos) << message;
  EXPECT_NE(message.find("512 cached bytes were freed"), std::string::npos)
      << message;
  EXPECT_NE(message.find("fake device is full"), std::string::npos) << message;
  EXPECT_EQ(ledger.requests.size(), 4u);  // 4 MiB, 512, 1024 twice
  EXPECT_EQ(alloc->stats().bytes_cached, 0u);
  EXPECT_TRUE(alloc->Free(held).ok());
}

TEST(CachingAllocator, OtherBackendErrorsPassThroughWithoutRetry) {
  Ledger ledger;
  ledger.forced_error = absl::InternalError("invalid device ordinal");
  auto alloc = MakeAllocator(&ledger);
  absl::StatusOr<void*> p = alloc->Allocate(64);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(p.status().message().find("fake:0: allocating 64 bytes: invalid"),
            absl::string_view::npos)
      << p.status();
  EXPECT_EQ(ledger.requests.size(), 1u);
  EXPECT_EQ(alloc->stats().oom_retries, 0);
}

TEST(CachingAllocator, RejectsDoubleAndForeignFrees) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  EXPECT_TRUE(alloc->Free(nullptr).ok());
  void* p = *alloc->Allocate(10);
  ASSERT_TRUE(alloc->Free(p).ok());
  absl::Status twice = alloc->Free(p);
  EXPECT_TRUE(absl::IsInvalidArgument(twice)) << twice;
  EXPECT_NE(twice.message().find("not a block in use"),
            absl::string_view::npos);
  int local = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(alloc->Free(&local)));
  EXPECT_EQ(alloc->stats().blocks_cached, 1u);  // cached once, not twice
}

TEST(CachingAllocator, DestructorFreesCachedButNotInUseBlocks) {
  Ledger ledger;
  void* kept = nullptr;
  {
    auto alloc = MakeAllocator(&ledger);
    kept = *alloc->Allocate(100);
    void* a = *alloc->Allocate(100);
    void* b = *alloc->Allocate(5000);
    ASSERT_TRUE(alloc->Free(a).ok());
    ASSERT_TRUE(alloc->Free(b).ok());
  }
  EXPECT_EQ(ledger.frees, 2);
  EXPECT_FALSE(ledger.bad_free);
  EXPECT_EQ(ledger.live, std::set<void*>{kept});
  std::free(kept);
}

TEST(CachingAllocator, EmptyCacheReturnsOnlyCachedBlocks) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  void* used = *alloc->Allocate(100);
  void* spare = *alloc->Allocate(2 * kMiB);
  ASSERT_TRUE(alloc->Free(spare).ok());
  alloc->EmptyCache();
  EXPECT_EQ(ledger.live, std::set<void*>{used});
  EXPECT_EQ(alloc->stats().bytes_cached, 0u);
  EXPECT_EQ(alloc->stats().backend_frees, 1);
  ASSERT_TRUE(alloc->Free(used).ok());
}

// Four threads allocate, fill, check and free blocks of mixed sizes. A block
// handed to two threads at once would show the other thread's fill.
TEST(CachingAllocator, ConcurrentUseFromFourThreads) {
  Ledger ledger;
  auto alloc = MakeAllocator(&ledger);
  constexpr int kThreads = 4, kIterations = 3000, kHeld = 6;
  const size_t sizes[] = {64, 1000, 5000, 70000, 2 * kMiB + 1};
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      struct Held {
        unsigned char* p;
        size_t bytes;
      };
      std::vector<Held> held;
      for (int i = 0; i < kIterations; ++i) {
        const size_t bytes = sizes[(i * 7 + t) % 5];
        absl::StatusOr<void*> p = alloc->Allocate(bytes);
        if (!p.ok()) {
          ++failures[t];
          continue;
        }
        auto* bytes_p = static_cast<unsigned char*>(*p);
        std::memset(bytes_p, t + 1, bytes);
        held.push_back({bytes_p, bytes});
        if (held.size() < kHeld) continue;
        const Held h = held[i % held.size()];
        held.erase(held.begin() + i % held.size());
        if (h.p[0] != t + 1 || h.p[h.bytes - 1] != t + 1) ++failures[t];
        if (!alloc->Free(h.p).ok()) ++failures[t];
      }
      for (const Held& h : held) {
        if (!alloc->Free(h.p).ok()) ++failures[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  const AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(s.cache_hits + s.backend_allocations,
            int64_t{kThreads} * kIterations);
  // At most kHeld blocks per thread are live, so the backend saw at most
  // that many per size; everything else came from the cache.
  EXPECT_LE(s.backend_allocations, int64_t{kThreads} * kHeld * 5);
  EXPECT_EQ(static_cast<int64_t>(s.blocks_cached), s.backend_allocations);
  EXPECT_EQ(ledger.live.size(), s.blocks_cached);
  EXPECT_FALSE(ledger.bad_free);
}

}  // namespace
}  // namespace cohort
