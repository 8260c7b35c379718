// The CPU engine's interaction (LayerSpec.interaction).
#include "worker/layers/interaction.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeInteraction(const LayerSpec& l) {
  const InteractionSpec& i = l.interaction();
  return std::make_unique<Interaction<T>>(i.kind() == InteractionSpec::CAT
                                              ? InteractionKind::kCat
                                              : InteractionKind::kDot,
                                          i.dim());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kInteraction, MakeInteraction);

}  // namespace cohort
