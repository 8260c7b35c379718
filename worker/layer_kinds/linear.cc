// The CPU engine's linear layer (LayerSpec.linear).
#include "worker/layers/linear.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeLinear(const LayerSpec& l) {
  const LinearSpec& s = l.linear();
  return std::make_unique<Linear<T>>(s.out_features(), !s.no_bias(),
                                     s.per_position());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kLinear, MakeLinear);

}  // namespace cohort
