// The CPU engine's flatten (LayerSpec.flatten).
#include "worker/layers/flatten.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeFlatten(const LayerSpec&) {
  return std::make_unique<Flatten<T>>();
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kFlatten, MakeFlatten);

}  // namespace cohort
