// Optimizers over a model's flat parameter buffer (worker/layers/
// param_store.h), as a job's OptimizerSpec describes them (torch.optim.SGD,
// Adam, AdamW).
//
// The update rules themselves, their state and their ownership and thread
// safety are kernels/update_rules.h's, written once for the CPU engine, the
// GPU kernels and the parameter-server shard; this header only maps the
// spec onto them.
#ifndef COHORT_WORKER_OPTIM_OPTIMIZER_H_
#define COHORT_WORKER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>

#include "kernels/update_rules.h"
#include "proto/job.pb.h"

namespace cohort {

// The engine's name for an update rule: Step and State() as there.
template <typename T>
using Optimizer = UpdateRule<T>;

// The optimizer `spec` describes, for a flat buffer of `num_elements`.
// `spec` must have been validated and its defaults filled (ParseJobSpec);
// Adam's betas and eps are used as given, zeros included.
// The update rules' options for `spec` (SGD family, Adam family): one
// mapping for the CPU rules and the GPU kernels.
SgdOptions SgdOptionsOf(const OptimizerSpec& spec);
AdamOptions AdamOptionsOf(const OptimizerSpec& spec);

template <typename T>
std::unique_ptr<Optimizer<T>> MakeOptimizer(const OptimizerSpec& spec,
                                            int64_t num_elements);

extern template std::unique_ptr<Optimizer<float>> MakeOptimizer<float>(
    const OptimizerSpec&, int64_t);
extern template std::unique_ptr<Optimizer<double>> MakeOptimizer<double>(
    const OptimizerSpec&, int64_t);

}  // namespace cohort

#endif  // COHORT_WORKER_OPTIM_OPTIMIZER_H_
