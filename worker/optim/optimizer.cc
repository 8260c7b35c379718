#include "worker/optim/optimizer.h"

#include "common/logging.h"

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

template <typename T>
std::unique_ptr<Optimizer<T>> MakeOptimizer(const OptimizerSpec& spec,
                                            int64_t num_elements) {
  switch (spec.kind()) {
    case OptimizerSpec::SGD:
      return MakeSgdRule<T>(SgdOptionsOf(spec), num_elements);
    case OptimizerSpec::ADAM:
    case OptimizerSpec::ADAMW:
      return MakeAdamRule<T>(AdamOptionsOf(spec), num_elements);
    default:
      CHECK(false) << "unknown optimizer kind " << spec.kind();
      return nullptr;
  }
}

template std::unique_ptr<Optimizer<float>> MakeOptimizer<float>(
    const OptimizerSpec&, int64_t);
template std::unique_ptr<Optimizer<double>> MakeOptimizer<double>(
    const OptimizerSpec&, int64_t);

}  // namespace cohort
