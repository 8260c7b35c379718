// The GPU engine's upsampling (LayerSpec.upsample).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_upsample.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeUpsample(const LayerSpec& l,
                                                       Precision) {
  const UpsampleSpec& u = l.upsample();
  return std::make_unique<GpuUpsample>(u.scale(),
                                       u.mode() == UpsampleSpec::BILINEAR);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kUpsample, &MakeUpsample);

}  // namespace cohort
