// How many workers a job waits for: a command's --workers, --min-workers
// and --max-workers win over the spec's cluster section, which wins over
// the default (1, or a command's own: `cohort local` starts 2, `cohort
// launch` the launched tasks).
//
// Thread safety: pure functions.
#ifndef COHORT_COMMON_SPEC_WORKERS_H_
#define COHORT_COMMON_SPEC_WORKERS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace cohort {

// The worker count flags of a command; 0: not given.
struct WorkerCountFlags {
  int64_t workers = 0;      // --workers=N: at least and at most N
  int64_t min_workers = 0;  // --min-workers
  int64_t max_workers = 0;  // --max-workers
  bool any() const { return workers > 0 || min_workers > 0 || max_workers > 0; }
};

// The most workers a spec or a flag may ask for (cluster.max_workers'
// bound).
inline constexpr int kMaxWorkers = 4096;

// Whether `cluster` (defaults filled) asks for the default one worker,
// which a command with a default of its own replaces.
bool HasDefaultWorkerCounts(const ClusterSpec& cluster);

// Sets `cluster`'s min_workers and max_workers (defaults filled) from the
// flags that were given, keeping the other one where it still fits: a
// --min-workers above the spec's maximum raises the maximum when the spec
// left it to follow the minimum (the two were equal). INVALID_ARGUMENT,
// naming the flags, for --workers with either of the others, a minimum
// above the maximum, or a count past kMaxWorkers.
absl::Status ApplyWorkerCounts(const WorkerCountFlags& flags,
                               ClusterSpec* cluster);

// "2 workers", "1 worker" or "2..4 workers".
std::string DescribeWorkerCounts(const ClusterSpec& cluster);

}  // namespace cohort

#endif  // COHORT_COMMON_SPEC_WORKERS_H_
