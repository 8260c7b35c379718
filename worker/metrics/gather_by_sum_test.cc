#include "worker/metrics/gather_by_sum.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"
#include "worker/comm/test_ranks.h"

namespace cohort {
namespace {

// Rank r's part k: values whose sums with zeros a lossy path would change
// (fractions, large and tiny magnitudes, infinities, a NaN); rank 1's part
// 1 is empty.
std::vector<float> Values(int rank, int part) {
  if (rank == 1 && part == 1) return {};
  std::vector<float> v;
  for (int i = 0; i < 5 + 3 * rank + part; ++i) {
    v.push_back(static_cast<float>(rank * 1000 + part * 100 + i) / 7.0f +
                1e-30f * i);
  }
  v.push_back(rank % 2 ? std::numeric_limits<float>::infinity()
                       : -std::numeric_limits<float>::infinity());
  v.push_back(3.4e38f);
  v.push_back(1e-38f);
  if (rank == 2) v.push_back(std::nanf(""));
  return v;
}

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

std::string Compare(const std::vector<float>& got,
                    const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return absl::StrCat(got.size(), " values, want ", want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i])
                                          : Bits(got[i]) == Bits(want[i]);
    if (!same) return absl::StrCat("value ", i, ": ", got[i], " vs ", want[i]);
  }
  return "";
}

TEST(GatherBySum, EveryRankGetsEveryPartInRankOrderBitForBit) {
  constexpr int kRanks = 3;
  auto group = LocalGroup::Connect(kRanks, GlooOptions());
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::string> errors(kRanks);
  (*group)->Run([&](int rank) {
    std::vector<float> a = Values(rank, 0), b = Values(rank, 1);
    std::vector<float>* parts[] = {&a, &b};
    Communicator& comm = (*group)->comm(rank);
    const absl::Status s = GatherBySum(
        rank, kRanks, parts,
        [&comm](float* data, int64_t n) { return comm.AllReduceSum(data, n); });
    if (!s.ok()) {
      errors[rank] = std::string(s.message());
      return;
    }
    for (int k = 0; k < 2; ++k) {
      std::vector<float> want;
      for (int r = 0; r < kRanks; ++r) {
        const std::vector<float> v = Values(r, k);
        want.insert(want.end(), v.begin(), v.end());
      }
      const std::string diff = Compare(*parts[k], want);
      if (!diff.empty()) errors[rank] += absl::StrCat("part ", k, ": ", diff);
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Nothing to gather anywhere: the count all-reduce only, no empty one.
TEST(GatherBySum, EmptyPartsEverywhereGatherNothing) {
  constexpr int kRanks = 2;
  auto group = LocalGroup::Connect(kRanks, GlooOptions());
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::string> errors(kRanks);
  std::vector<int> calls(kRanks, 0);
  (*group)->Run([&](int rank) {
    std::vector<float> a;
    std::vector<float>* parts[] = {&a};
    Communicator& comm = (*group)->comm(rank);
    const absl::Status s =
        GatherBySum(rank, kRanks, parts, [&](float* data, int64_t n) {
          ++calls[rank];
          return comm.AllReduceSum(data, n);
        });
    if (!s.ok() || !a.empty()) errors[rank] = s.ToString();
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(calls[r], 1) << "rank " << r;
  }
}

TEST(GatherBySum, OneRankNeedsNoCollective) {
  std::vector<float> a = {1, 2, 3};
  std::vector<float>* parts[] = {&a};
  const absl::Status s = GatherBySum(0, 1, parts, [](float*, int64_t) {
    return absl::InternalError("no collective expected");
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
}

TEST(GatherBySum, AFailedAllReduceLeavesThePartsAsTheyWere) {
  std::vector<float> a = {1, 2, 3};
  std::vector<float>* parts[] = {&a};
  const absl::Status s = GatherBySum(1, 2, parts, [](float*, int64_t) {
    return absl::UnavailableError("peer 0 is gone");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace cohort
