// The GPU engine's ResNet blocks (LayerSpec.residual).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_residual.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeResidual(const LayerSpec& l,
                                                       Precision precision) {
  return std::make_unique<GpuResidual>(
      l.residual().out_channels(),
      l.residual().stride() > 0 ? l.residual().stride() : 1,
      l.residual().bottleneck(), precision == BF16);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kResidual, &MakeResidual);

}  // namespace cohort
