// The CPU engine's pre-norm transformer block (LayerSpec.transformer_block).
#include "worker/layers/transformer_block.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeTransformerBlock(const LayerSpec& l) {
  const TransformerBlockSpec& s = l.transformer_block();
  TransformerBlockOptions o;
  o.heads = s.heads();
  if (s.mlp_ratio() > 0) o.mlp_ratio = s.mlp_ratio();
  o.causal = !s.bidirectional();
  o.dropout = s.dropout();
  if (s.eps() > 0) o.eps = s.eps();
  return std::make_unique<TransformerBlock<T>>(o);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kTransformerBlock, MakeTransformerBlock);

}  // namespace cohort
