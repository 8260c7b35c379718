// Gathers variable-length float vectors from every rank of a job with
// nothing but an in-place sum all-reduce (all the communicators offer):
// every rank writes its values into its own slot of a zero-filled buffer
// and the buffer is summed, which leaves each value as it was (x + 0 is
// exactly x; only -0 becomes +0). The slots' sizes come from a first,
// small all-reduce of every rank's counts. Every rank ends with the same
// bits, so whatever it computes from them next agrees across the job.
//
// Used for the evaluation's AUC, which needs every sample's score; the
// traffic is one float per gathered value plus two per (rank, part).
//
// A plain function; thread-safe for distinct arguments (each rank calls it
// from its own thread with its own vectors).
#ifndef COHORT_WORKER_METRICS_GATHER_BY_SUM_H_
#define COHORT_WORKER_METRICS_GATHER_BY_SUM_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace cohort {

// Sums `count` floats at `data` in place over all ranks, as
// Communicator::AllReduceSum does; every rank calls it alike.
using AllReduceSumFn = std::function<absl::Status(float* data, int64_t count)>;

// Rank `rank` of `ranks`: replaces each of `parts` (the same number on
// every rank) by the concatenation, in rank order, of that part over all
// ranks. Two collectives when ranks > 1, none otherwise. A failed
// all-reduce's status is returned and the parts are left as they were.
absl::Status GatherBySum(int rank, int ranks,
                         absl::Span<std::vector<float>* const> parts,
                         const AllReduceSumFn& all_reduce_sum);

}  // namespace cohort

#endif  // COHORT_WORKER_METRICS_GATHER_BY_SUM_H_
