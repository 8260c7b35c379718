// The CPU engine's softmax over the features (LayerSpec.softmax).
#include "worker/layers/softmax.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeSoftmax(const LayerSpec&) {
  return std::make_unique<Softmax<T>>();
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kSoftmax, MakeSoftmax);

}  // namespace cohort
