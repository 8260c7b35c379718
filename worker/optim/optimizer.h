// Optimizers over a model's flat parameter buffer (worker/layers/
// param_store.h), as a job's OptimizerSpec describes them (torch.optim.SGD,
// Adam, AdamW, RMSprop; LAMB, LARS).
//
// The update rules themselves, their state and their ownership and thread
// safety are kernels/update_rules.h's, written once for the CPU engine, the
// GPU kernels and the parameter-server shard; this header only maps the
// spec onto them.
#ifndef COHORT_WORKER_OPTIM_OPTIMIZER_H_
#define COHORT_WORKER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/update_rules.h"
#include "proto/job.pb.h"

namespace cohort {

// The engine's name for an update rule: Step and State() as there.
template <typename T>
using Optimizer = UpdateRule<T>;

// The optimizer `spec` describes, for a flat buffer of `num_elements`.
// `spec` must have been validated and its defaults filled (ParseJobSpec);
// Adam's betas and eps are used as given, zeros included.
// Whether `spec`'s rule scales each tensor by norms over the whole tensor
// (LAMB, LARS): its steppers must cut the buffer on kNormBlock multiples
// and step in two passes (kernels/update_rules.h).
bool NeedsTensorNorms(const OptimizerSpec& spec);

// The tensors of `job`'s flat parameter buffer over samples of shape
// `input` (common/model_sizes.h), with decay off on biases and norm
// parameters when optimizer.no_decay_bias_and_norm says so. `job` must be
// valid.
absl::StatusOr<std::vector<ParamTensor>> JobParamTensors(const JobSpec& job,
                                                         const Shape& input);

// `layout`: the tensors' pieces within the rule's elements (MakeRuleLayout);
// empty for a buffer that is one tensor with decay.
template <typename T>
std::unique_ptr<Optimizer<T>> MakeOptimizer(const OptimizerSpec& spec,
                                            int64_t num_elements,
                                            const RuleLayout& layout = {});

extern template std::unique_ptr<Optimizer<float>> MakeOptimizer<float>(
    const OptimizerSpec&, int64_t, const RuleLayout&);
extern template std::unique_ptr<Optimizer<double>> MakeOptimizer<double>(
    const OptimizerSpec&, int64_t, const RuleLayout&);

}  // namespace cohort

#endif  // COHORT_WORKER_OPTIM_OPTIMIZER_H_
