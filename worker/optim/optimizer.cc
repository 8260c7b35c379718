#include "worker/optim/optimizer.h"

#include "common/logging.h"
#include "common/model_sizes.h"
#include "common/optimizer_options.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"

namespace cohort {

bool NeedsTensorNorms(const OptimizerSpec& spec) {
  return spec.kind() == OptimizerSpec::LAMB ||
         spec.kind() == OptimizerSpec::LARS;
}

absl::StatusOr<std::vector<ParamTensor>> JobParamTensors(const JobSpec& job,
                                                         const Shape& input) {
  // The engines' own sample shape, not the spec's reading of the data set.
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> layers,
                   LayerSpecs(job.model()));
  ASSIGN_OR_RETURN(const ModelSizes sizes, InferModelSizes(layers, input));
  std::vector<bool> no_decay;
  if (job.optimizer().no_decay_bias_and_norm()) no_decay = sizes.ParamNoDecay();
  return ParamTensorsOf(sizes.PaddedParamSizes(), no_decay);
}

template <typename T>
std::unique_ptr<Optimizer<T>> MakeOptimizer(const OptimizerSpec& spec,
                                            int64_t num_elements,
                                            const RuleLayout& layout) {
  return MakeUpdateRule<T>(RuleOptionsOf(spec), num_elements, layout);
}

template std::unique_ptr<Optimizer<float>> MakeOptimizer<float>(
    const OptimizerSpec&, int64_t, const RuleLayout&);
template std::unique_ptr<Optimizer<double>> MakeOptimizer<double>(
    const OptimizerSpec&, int64_t, const RuleLayout&);

}  // namespace cohort
