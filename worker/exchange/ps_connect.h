// How the worker process hands parameter-server mode its shards, without
// the training options depending on the PS client.
#ifndef COHORT_WORKER_EXCHANGE_PS_CONNECT_H_
#define COHORT_WORKER_EXCHANGE_PS_CONNECT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace cohort {

struct PsLink;  // worker/exchange/ps_exchange.h

// Connects to the shards once the model's parameter sizes and sparse tables
// (EmbeddingBagSpec.sparse, as the shards' Init takes them) are known, and
// leaves the parameters training starts from (the shards' initial values)
// in `params`. The link stays owned by the worker process. Called once,
// from the training thread.
using PsConnect = std::function<absl::StatusOr<PsLink*>(
    float* params, const std::vector<int64_t>& param_sizes,
    const std::vector<SparseTableInfo>& tables)>;

}  // namespace cohort

#endif  // COHORT_WORKER_EXCHANGE_PS_CONNECT_H_
