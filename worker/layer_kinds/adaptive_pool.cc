// The CPU engine's adaptive average pool (LayerSpec.adaptive_avgpool2d).
#include "worker/layers/adaptive_pool.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeAdaptiveAvgPool2d(const LayerSpec& l) {
  return std::make_unique<AdaptiveAvgPool2d<T>>(
      l.adaptive_avgpool2d().output());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kAdaptiveAvgpool2D, MakeAdaptiveAvgPool2d);

}  // namespace cohort
