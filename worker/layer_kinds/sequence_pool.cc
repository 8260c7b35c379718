// The CPU engine's sequence_pool (LayerSpec.sequence_pool); MEAN is its
// only mode, which the spec check enforces.
#include "worker/layers/sequence_pool.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeSequencePool(const LayerSpec&) {
  return std::make_unique<SequencePool<T>>();
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kSequencePool, MakeSequencePool);

}  // namespace cohort
