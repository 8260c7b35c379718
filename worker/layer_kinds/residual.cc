// The CPU engine's ResNet blocks (LayerSpec.residual).
#include "worker/layers/residual.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeResidual(const LayerSpec& l) {
  const ResidualSpec& r = l.residual();
  const int64_t stride = r.stride() > 0 ? r.stride() : 1;
  if (r.bottleneck()) {
    return std::make_unique<Bottleneck<T>>(r.out_channels(), stride);
  }
  return std::make_unique<BasicBlock<T>>(r.out_channels(), stride);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kResidual, MakeResidual);

}  // namespace cohort
