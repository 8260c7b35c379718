// The CPU engine's dropout (LayerSpec.dropout).
#include "worker/layers/dropout.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeDropout(const LayerSpec& l) {
  return std::make_unique<Dropout<T>>(l.dropout().p());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kDropout, MakeDropout);

}  // namespace cohort
