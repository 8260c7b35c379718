// The GPU engine's sequence_pool (LayerSpec.sequence_pool); MEAN is its
// only mode, which the spec check enforces.
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_sequence_pool.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeSequencePool(const LayerSpec&,
                                                           Precision) {
  return std::make_unique<GpuSequencePool>();
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kSequencePool, &MakeSequencePool);

}  // namespace cohort
