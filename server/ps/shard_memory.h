// Whether a parameter-server shard's slice of a job fits this machine.
//
// A shard learns its job and index when it registers; the size of its
// slice of the parameters follows from the spec alone (the model's sizes by
// the shape inference of common/model_sizes.h, dealt out over the shards by
// the partition plan of common/partition.h, balanced to within a piece), so
// a shard that cannot hold it says so before the workers' Init arrives,
// instead of dying in the allocation.
//
// Thread safety: the function is pure apart from reading the machine's
// memory, and may be called concurrently.
#ifndef COHORT_SERVER_PS_SHARD_MEMORY_H_
#define COHORT_SERVER_PS_SHARD_MEMORY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace cohort {

// OK when shard `shard_index` of `num_shards` of `job` (validated, defaults
// filled) fits in `available_memory` bytes (-1: what the machine has,
// common/machine_memory.h). FailedPrecondition otherwise, one line:
// "its N of the job's M parameters need X (values, ...); shard 0 of 1
// needs X in all and this machine has Y available (MemAvailable)", where N
// is the least the plan can give it. The spec's own errors (a model that
// cannot be sized) as InvalidArgument.
absl::Status CheckShardMemory(const JobSpec& job, int shard_index,
                              int num_shards, int64_t available_memory = -1);

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_MEMORY_H_
