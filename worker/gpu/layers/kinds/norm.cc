// The GPU engine's layer and group norms (LayerSpec.layernorm and
// groupnorm).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_norm.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeLayerNorm(const LayerSpec& l,
                                                        Precision) {
  const LayerNormSpec& s = l.layernorm();
  return std::make_unique<GpuNorm>(0, s.eps() > 0 ? s.eps() : 1e-5,
                                   !s.no_affine(), s.per_position());
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGroupNorm(const LayerSpec& l,
                                                        Precision) {
  const GroupNormSpec& s = l.groupnorm();
  if (s.groups() < 1) {
    return absl::InvalidArgumentError("groupnorm: groups must be positive");
  }
  return std::make_unique<GpuNorm>(s.groups(), s.eps() > 0 ? s.eps() : 1e-5,
                                   !s.no_affine());
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kLayernorm, &MakeLayerNorm);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kGroupnorm, &MakeGroupNorm);

}  // namespace cohort
