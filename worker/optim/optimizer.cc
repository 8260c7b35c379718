#include "worker/optim/optimizer.h"

#include "common/logging.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"

namespace cohort {

SgdOptions SgdOptionsOf(const OptimizerSpec& spec) {
  SgdOptions o;
  o.momentum = spec.momentum();
  o.weight_decay = spec.weight_decay();
  o.nesterov = spec.nesterov();
  return o;
}

AdamOptions AdamOptionsOf(const OptimizerSpec& spec) {
  AdamOptions o;
  o.beta1 = spec.beta1();
  o.beta2 = spec.beta2();
  o.eps = spec.eps();
  o.weight_decay = spec.weight_decay();
  o.decoupled = spec.kind() == OptimizerSpec::ADAMW;
  return o;
}

RmspropOptions RmspropOptionsOf(const OptimizerSpec& spec) {
  RmspropOptions o;
  o.alpha = spec.alpha();
  o.eps = spec.eps();
  o.weight_decay = spec.weight_decay();
  o.momentum = spec.momentum();
  o.centered = spec.centered();
  return o;
}

LambOptions LambOptionsOf(const OptimizerSpec& spec) {
  LambOptions o;
  o.beta1 = spec.beta1();
  o.beta2 = spec.beta2();
  o.eps = spec.eps();
  o.weight_decay = spec.weight_decay();
  return o;
}

LarsOptions LarsOptionsOf(const OptimizerSpec& spec) {
  LarsOptions o;
  o.momentum = spec.momentum();
  o.weight_decay = spec.weight_decay();
  o.trust_coefficient = spec.trust_coefficient();
  return o;
}

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
  switch (spec.kind()) {
    case OptimizerSpec::SGD:
      return MakeSgdRule<T>(SgdOptionsOf(spec), num_elements, layout);
    case OptimizerSpec::ADAM:
    case OptimizerSpec::ADAMW:
      return MakeAdamRule<T>(AdamOptionsOf(spec), num_elements, layout);
    case OptimizerSpec::RMSPROP:
      return MakeRmspropRule<T>(RmspropOptionsOf(spec), num_elements, layout);
    case OptimizerSpec::LAMB:
      return MakeLambRule<T>(LambOptionsOf(spec), num_elements, layout);
    case OptimizerSpec::LARS:
      return MakeLarsRule<T>(LarsOptionsOf(spec), num_elements, layout);
    default:
      CHECK(false) << "unknown optimizer kind " << spec.kind();
      return nullptr;
  }
}

template std::unique_ptr<Optimizer<float>> MakeOptimizer<float>(
    const OptimizerSpec&, int64_t, const RuleLayout&);
template std::unique_ptr<Optimizer<double>> MakeOptimizer<double>(
    const OptimizerSpec&, int64_t, const RuleLayout&);

}  // namespace cohort
