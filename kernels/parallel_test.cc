// The kernels that split their loops over the compute threads give the
// same bits on one thread and on several.
#include "kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "common/update_options.h"
#include "gtest/gtest.h"
#include "kernels/elementwise.h"
#include "kernels/onednn_threads.h"
#include "kernels/update_rules.h"

namespace cohort {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

TEST(ParallelRanges, CoversEveryIndexOnceOnAlignedBoundaries) {
  SetOnednnThreads(2);
  const int64_t n = 3 * kElementwiseGrain + 5;
  std::vector<int> seen(n, 0);
  std::vector<int64_t> starts;
  ParallelRanges(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++seen[i];
#pragma omp critical
    starts.push_back(b);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << i;
  for (int64_t b : starts) EXPECT_EQ(b % kRangeAlign, 0) << b;
  SetOnednnThreads(0);
}

TEST(ParallelItems, SplitsFewItemsEvenly) {
  SetOnednnThreads(2);
  for (int64_t n : {2, 8, 48, 49}) {
    std::vector<int> seen(n, 0);
    std::vector<int64_t> sizes;
    ParallelItems(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++seen[i];
#pragma omp critical
      sizes.push_back(e - b);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << n << " " << i;
    ASSERT_GE(sizes.size(), 2u) << n;
    const auto [least, most] = std::minmax_element(sizes.begin(), sizes.end());
    EXPECT_LE(*most - *least, 1) << n;
  }
  // Fewer items than the grain asks for run on the caller as one range.
  int ranges = 0;
  ParallelItems(8, 5, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 8);
    ++ranges;
  });
  EXPECT_EQ(ranges, 1);
  SetOnednnThreads(0);
}

// A thread that stalls in its first range loses the rest of its share to
// the other thread, which finishes the whole loop while it waits.
TEST(ParallelItems, AnotherThreadTakesOverAStalledShare) {
  SetOnednnThreads(2);
  const int64_t n = 64;
  std::vector<std::atomic<int>> seen(n);
  std::atomic<int64_t> done{0};
  std::atomic<bool> stalled{false}, finished_while_stalled{false};
  ParallelItems(n, 1, [&](int64_t b, int64_t e) {
    if (b == 0) {
      stalled = true;
      // Bounded, so that a scheduler that never hands work over fails
      // rather than hangs.
      const auto limit =
          std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (done.load() < n - e && std::chrono::steady_clock::now() < limit) {
        std::this_thread::yield();
      }
      finished_while_stalled = done.load() == n - e;
    }
    for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
    done.fetch_add(e - b);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
  EXPECT_TRUE(stalled);
  EXPECT_TRUE(finished_while_stalled);
  SetOnednnThreads(0);
}

// Whatever a slot's length and wherever the buffer starts, more than a 4 KB
// page lies between the last element of one slot and the first of the next.
TEST(SlotLength, SlotsNeverShareAPage) {
  constexpr uintptr_t kPage = 4096;
  for (int64_t elements : {1, 15, 16, 504, 1024, 1025, 4096, 100000}) {
    const int64_t floats = SlotLength<float>(elements);
    const int64_t doubles = SlotLength<double>(elements);
    EXPECT_GE(floats, elements + 1024) << elements;
    EXPECT_GE(doubles, elements + 512) << elements;
    for (uintptr_t base = 0; base < kPage; base += 64) {
      const uintptr_t last = base + (elements - 1) * sizeof(float);
      const uintptr_t next = base + floats * sizeof(float);
      EXPECT_LT(last / kPage, next / kPage) << elements << " at " << base;
      EXPECT_GT(next - last, kPage) << elements << " at " << base;
    }
  }
}

// Runs `f` on 1 and on 2 threads and returns both outputs.
template <typename F>
std::pair<std::vector<float>, std::vector<float>> OneAndTwo(const F& f) {
  SetOnednnThreads(1);
  std::vector<float> one = f();
  SetOnednnThreads(2);
  std::vector<float> two = f();
  SetOnednnThreads(0);
  return {one, two};
}

TEST(ParallelKernels, ElementwiseMapsAreThreadCountFree) {
  const int64_t n = 5 * kElementwiseGrain + 3;
  const std::vector<float> a = Random(n, 1), b = Random(n, 2);
  auto [one, two] = OneAndTwo([&] {
    std::vector<float> out(n), grad(n), sum(n);
    ReluForward(a.data(), out.data(), n);
    ReluBackward(a.data(), b.data(), grad.data(), n);
    Add(out.data(), grad.data(), sum.data(), n);
    AddInPlace(a.data(), sum.data(), n);
    return sum;
  });
  EXPECT_EQ(one, two);
}

TEST(ParallelKernels, UpdateRulesAreThreadCountFree) {
  const int64_t n = 4 * kElementwiseGrain + 7;
  const std::vector<float> g = Random(n, 5);
  auto [one, two] = OneAndTwo([&] {
    std::vector<float> p = Random(n, 6), q = p;
    SgdOptions sgd;
    sgd.momentum = 0.9;
    sgd.weight_decay = 1e-4;
    auto rule = MakeSgdRule<float>(sgd, n);
    AdamOptions adam;
    adam.weight_decay = 0.1;
    adam.decoupled = true;
    auto adamw = MakeAdamRule<float>(adam, n);
    for (int step = 0; step < 3; ++step) {
      rule->Step(absl::MakeSpan(p), g, 0.01);
      adamw->Step(absl::MakeSpan(q), g, 0.001);
    }
    p.insert(p.end(), q.begin(), q.end());
    return p;
  });
  EXPECT_EQ(one, two);
}

}  // namespace
}  // namespace cohort
