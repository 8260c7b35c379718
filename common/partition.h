// Splits a model's flat parameter buffer into partitions for the
// parameter-server shards: tensors larger than `partition_bytes` are cut into
// pieces of about that size, consecutive smaller tensors are grouped up to
// it, and the partitions are spread over the shards balanced by bytes
// (largest first, each to the least-loaded shard; ties to the lowest index).
// Deterministic: the same sizes give the same plan everywhere.
#ifndef COHORT_COMMON_PARTITION_H_
#define COHORT_COMMON_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"

namespace cohort {

// Partitions ordered by offset (ids 0, 1, ...), covering every element of
// the buffer exactly once. INVALID_ARGUMENT for no parameters, a size below
// 1, fewer than 1 shard or partition_bytes below 4.
absl::StatusOr<std::vector<Partition>> PlanPartitions(
    const std::vector<int64_t>& param_sizes, int num_shards,
    int64_t partition_bytes);

}  // namespace cohort

#endif  // COHORT_COMMON_PARTITION_H_
