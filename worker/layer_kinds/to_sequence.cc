// The CPU engine's to_sequence (LayerSpec.to_sequence).
#include "worker/layers/to_sequence.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeToSequence(const LayerSpec&) {
  return std::make_unique<ToSequence<T>>();
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kToSequence, MakeToSequence);

}  // namespace cohort
