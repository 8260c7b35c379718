#include "worker/gpu/layers/gpu_layer_factory.h"

#include "common/layer_kind.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGpuLayer(const LayerSpec& l,
                                                       Precision precision) {
  const GpuLayerMaker maker = FindGpuLayer(LayerKindNumber(l));
  if (maker == nullptr) {
    return absl::InvalidArgumentError("a model layer names no layer kind");
  }
  return maker(l, precision);
}

}  // namespace cohort
