// The GPU engine's adaptive average pool (LayerSpec.adaptive_avgpool2d).
#include "worker/gpu/layers/gpu_adaptive_pool.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeAdaptiveAvgPool2d(
    const LayerSpec& l, Precision) {
  return std::make_unique<GpuAdaptiveAvgPool2d>(
      l.adaptive_avgpool2d().output());
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kAdaptiveAvgpool2D,
                          &MakeAdaptiveAvgPool2d);

}  // namespace cohort
