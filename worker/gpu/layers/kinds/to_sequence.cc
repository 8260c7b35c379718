// The GPU engine's to_sequence (LayerSpec.to_sequence).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_to_sequence.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeToSequence(const LayerSpec&,
                                                         Precision) {
  return std::make_unique<GpuToSequence>();
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kToSequence, &MakeToSequence);

}  // namespace cohort
