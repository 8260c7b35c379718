// The CPU engine's upsampling (LayerSpec.upsample).
#include "worker/layers/upsample.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeUpsample(const LayerSpec& l) {
  const UpsampleSpec& u = l.upsample();
  return std::make_unique<Upsample<T>>(
      u.scale(), u.mode() == UpsampleSpec::BILINEAR ? UpsampleMode::kBilinear
                                                    : UpsampleMode::kNearest);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kUpsample, MakeUpsample);

}  // namespace cohort
