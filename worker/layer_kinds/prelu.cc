// The CPU engine's PReLU (LayerSpec.prelu).
#include "worker/layers/prelu.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

// A spec that skipped the defaults (common/layer_kinds/prelu.cc) still
// means PyTorch's: one slope starting at 0.25.
template <typename T>
std::unique_ptr<Layer<T>> MakePrelu(const LayerSpec& l) {
  const PreluSpec& p = l.prelu();
  return std::make_unique<Prelu<T>>(
      p.num_parameters() > 0 ? p.num_parameters() : 1,
      p.init() != 0 ? p.init() : 0.25);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kPrelu, MakePrelu);

}  // namespace cohort
