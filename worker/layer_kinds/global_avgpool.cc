// The CPU engine's global average pool (LayerSpec.global_avgpool).
#include "worker/layer_registry.h"
#include "worker/layers/pool.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeGlobalAvgPool(const LayerSpec&) {
  return std::make_unique<GlobalAvgPool<T>>();
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kGlobalAvgpool, MakeGlobalAvgPool);

}  // namespace cohort
