// The GPU engine's flatten (LayerSpec.flatten).
#include "worker/gpu/layers/gpu_flatten.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeFlatten(const LayerSpec&,
                                                      Precision) {
  return std::make_unique<GpuFlatten>();
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kFlatten, &MakeFlatten);

}  // namespace cohort
