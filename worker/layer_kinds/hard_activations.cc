// The CPU engine's relu6, hardsigmoid and hardswish, on the elementwise
// activation kernels (kernels/activations.h).
#include "worker/layer_registry.h"
#include "worker/layers/elementwise_activation.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeRelu6(const LayerSpec&) {
  return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kRelu6);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeHardsigmoid(const LayerSpec&) {
  return std::make_unique<ElementwiseActivation<T>>(
      ActivationKind::kHardsigmoid);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeHardswish(const LayerSpec&) {
  return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kHardswish);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kRelu6, MakeRelu6);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kHardsigmoid, MakeHardsigmoid);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kHardswish, MakeHardswish);

}  // namespace cohort
