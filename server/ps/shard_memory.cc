#include "server/ps/shard_memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/machine_memory.h"
#include "common/memory_estimate.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// The least this shard holds: the partition plan (common/partition.h)
// deals pieces of at most about partition_bytes, largest first, each to
// the least-loaded shard, so no shard ends more than a piece below the
// mean. A bound instead of the plan itself, which for the models this
// check exists for would have millions of partitions.
int64_t LeastSlice(int64_t total, int num_shards, int64_t partition_bytes) {
  if (num_shards <= 1) return total;
  const int64_t piece = 2 * std::max<int64_t>(1, partition_bytes / 4);
  return std::max<int64_t>(0, total / num_shards - piece);
}

}  // namespace

absl::Status CheckShardMemory(const JobSpec& job, int shard_index,
                              int num_shards, int64_t available_memory) {
  ASSIGN_OR_RETURN(const ModelSizes sizes, InferJobModelSizes(job));
  const int64_t elements = LeastSlice(sizes.padded_parameters, num_shards,
                                      job.ps().partition_bytes());
  AvailableMemory available{available_memory, "the given limit"};
  if (available_memory < 0) {
    absl::StatusOr<AvailableMemory> detected = DetectAvailableMemory();
    if (!detected.ok()) return absl::OkStatus();  // nothing to compare with
    available = *detected;
  }
  return CheckMemoryFits(
      EstimateShardMemory(job, elements, sizes.padded_parameters), available,
      absl::StrCat("shard ", shard_index, " of ", num_shards));
}

}  // namespace cohort
