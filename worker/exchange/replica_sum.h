// The one place where local replicas' gradients are added up: the
// all-reduce exchange, the parameter-server exchange and the CPU engine's
// local reduction all combine a finished range into replica 0's buffer.
#ifndef COHORT_WORKER_EXCHANGE_REPLICA_SUM_H_
#define COHORT_WORKER_EXCHANGE_REPLICA_SUM_H_

#include <cstdint>
#include <vector>

namespace cohort {

// grads[0][from, to) += grads[q][from, to) for q in [1, count), then
// *= scale unless scale is 1. Not thread-safe for overlapping ranges.
void SumReplicasInto(const std::vector<float*>& grads, int count, int64_t from,
                     int64_t to, float scale);

}  // namespace cohort

#endif  // COHORT_WORKER_EXCHANGE_REPLICA_SUM_H_
