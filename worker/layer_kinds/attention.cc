// The CPU engine's multi-head self-attention (LayerSpec.attention).
#include "worker/layers/attention.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeAttention(const LayerSpec& l) {
  const AttentionSpec& s = l.attention();
  return std::make_unique<Attention<T>>(
      AttentionOptions{s.heads(), !s.bidirectional(), s.dropout()});
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kAttention, MakeAttention);

}  // namespace cohort
