// The GPU engine's linear layer (LayerSpec.linear).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_linear.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeLinear(const LayerSpec& l,
                                                     Precision precision) {
  const LinearSpec& s = l.linear();
  return std::make_unique<GpuLinear>(s.out_features(), !s.no_bias(),
                                     precision == BF16, s.per_position());
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kLinear, &MakeLinear);

}  // namespace cohort
