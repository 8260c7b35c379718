// The GPU engine's pre-norm transformer block
// (LayerSpec.transformer_block).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_transformer_block.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeTransformerBlock(
    const LayerSpec& l, Precision precision) {
  const TransformerBlockSpec& t = l.transformer_block();
  return std::make_unique<GpuTransformerBlock>(
      t.heads(), t.mlp_ratio() > 0 ? t.mlp_ratio() : 4, t.bidirectional(),
      t.dropout(), t.eps() > 0 ? t.eps() : 1e-5, precision == BF16);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kTransformerBlock, &MakeTransformerBlock);

}  // namespace cohort
