#include "worker/metrics/gather_by_sum.h"

#include <algorithm>

#include "common/logging.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// A count travels as two floats, its high and low 24 bits, each exact in a
// float, so counts up to 2^48 survive the float all-reduce.
constexpr int64_t kLowBits = int64_t{1} << 24;

// Every (part, rank)'s value count, part-major, as all ranks see them.
absl::StatusOr<std::vector<int64_t>> AllCounts(
    int rank, int ranks, absl::Span<std::vector<float>* const> parts,
    const AllReduceSumFn& all_reduce_sum) {
  const size_t slots = parts.size() * ranks;
  std::vector<float> encoded(2 * slots, 0.0f);
  for (size_t k = 0; k < parts.size(); ++k) {
    const int64_t n = static_cast<int64_t>(parts[k]->size());
    const size_t at = 2 * (k * ranks + rank);
    encoded[at] = static_cast<float>(n / kLowBits);
    encoded[at + 1] = static_cast<float>(n % kLowBits);
  }
  RETURN_IF_ERROR(all_reduce_sum(encoded.data(), encoded.size()));
  std::vector<int64_t> counts(slots);
  for (size_t i = 0; i < slots; ++i) {
    counts[i] = static_cast<int64_t>(encoded[2 * i]) * kLowBits +
                static_cast<int64_t>(encoded[2 * i + 1]);
  }
  return counts;
}

}  // namespace

absl::Status GatherBySum(int rank, int ranks,
                         absl::Span<std::vector<float>* const> parts,
                         const AllReduceSumFn& all_reduce_sum) {
  CHECK(rank >= 0 && rank < ranks)
      << "GatherBySum: rank " << rank << " of " << ranks;
  if (ranks == 1 || parts.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<int64_t> counts,
                   AllCounts(rank, ranks, parts, all_reduce_sum));
  // Slot (k, r) starts after every slot before it, part-major: each part's
  // gathered values are then one contiguous range.
  std::vector<int64_t> begin(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    begin[i + 1] = begin[i] + counts[i];
  }
  // Every rank sees the same counts, so all of them skip alike.
  if (begin.back() == 0) return absl::OkStatus();
  std::vector<float> buffer(begin.back(), 0.0f);
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::vector<float>& mine = *parts[k];
    CHECK_EQ(static_cast<int64_t>(mine.size()), counts[k * ranks + rank]);
    std::copy(mine.begin(), mine.end(),
              buffer.begin() + begin[k * ranks + rank]);
  }
  RETURN_IF_ERROR(all_reduce_sum(buffer.data(), buffer.size()));
  for (size_t k = 0; k < parts.size(); ++k) {
    parts[k]->assign(buffer.begin() + begin[k * ranks],
                     buffer.begin() + begin[(k + 1) * ranks]);
  }
  return absl::OkStatus();
}

}  // namespace cohort
