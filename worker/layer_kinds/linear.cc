// The CPU engine's linear layer (LayerSpec.linear).
#include "worker/layers/linear.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeLinear(const LayerSpec& l) {
  return std::make_unique<Linear<T>>(l.linear().out_features(),
                                     !l.linear().no_bias());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kLinear, MakeLinear);

}  // namespace cohort
