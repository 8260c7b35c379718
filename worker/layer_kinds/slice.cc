// The CPU engine's slice (LayerSpec.slice).
#include "worker/layers/slice.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeSlice(const LayerSpec& l) {
  return std::make_unique<Slice<T>>(l.slice().begin(), l.slice().end());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kSlice, MakeSlice);

}  // namespace cohort
