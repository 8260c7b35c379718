// The GPU engine's multi-head self-attention (LayerSpec.attention).
#include "worker/gpu/layers/gpu_attention.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeAttention(const LayerSpec& l,
                                                        Precision precision) {
  return std::make_unique<GpuAttention>(
      l.attention().heads(), l.attention().bidirectional(),
      l.attention().dropout(), precision == BF16);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kAttention, &MakeAttention);

}  // namespace cohort
