#include "common/partition.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

// Cuts [0, total) at tensor boundaries and inside large tensors.
std::vector<Partition> Cut(const std::vector<int64_t>& sizes, int64_t chunk) {
  std::vector<Partition> out;
  int64_t start = 0, end = 0;  // the partition being grown
  auto close = [&] {
    if (end > start) {
      Partition p;
      p.set_offset(start);
      p.set_count(end - start);
      out.push_back(p);
    }
    start = end;
  };
  for (int64_t size : sizes) {
    if (size > chunk) {
      close();
      // Equal pieces of at most `chunk`, so no tail piece is tiny.
      const int64_t pieces = (size + chunk - 1) / chunk;
      for (int64_t k = 0; k < pieces; ++k) {
        end = start + size * (k + 1) / pieces - size * k / pieces;
        close();
      }
      continue;
    }
    if (end - start + size > chunk) close();
    end += size;
  }
  close();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Partition>> PlanPartitions(
    const std::vector<int64_t>& param_sizes, int num_shards,
    int64_t partition_bytes) {
  if (param_sizes.empty()) {
    return absl::InvalidArgumentError("the model has no parameters");
  }
  for (size_t i = 0; i < param_sizes.size(); ++i) {
    if (param_sizes[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", i, " has ", param_sizes[i],
                       " elements (want at least 1)"));
    }
  }
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("need at least 1 shard, got ", num_shards));
  }
  if (partition_bytes < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition_bytes must be at least 4, got ", partition_bytes));
  }
  std::vector<Partition> parts = Cut(param_sizes, partition_bytes / 4);
  std::vector<int> order(parts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return parts[a].count() > parts[b].count();
  });
  std::vector<int64_t> load(num_shards, 0);
  for (int i : order) {
    const int shard = static_cast<int>(
        std::min_element(load.begin(), load.end()) - load.begin());
    parts[i].set_shard(shard);
    load[shard] += parts[i].count();
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i].set_id(static_cast<int>(i));
  }
  return parts;
}

}  // namespace cohort
