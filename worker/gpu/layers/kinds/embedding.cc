// The GPU engine's embeddings and the tied head (LayerSpec.embedding,
// positional_embedding and tied_lm_head). GpuModel ties a tied_lm_head to
// the model's first embedding.
#include "worker/gpu/layers/gpu_embedding.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeEmbedding(const LayerSpec& l,
                                                        Precision) {
  return std::make_unique<GpuEmbedding>(l.embedding().vocab_size(),
                                        l.embedding().dim());
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakePositionalEmbedding(
    const LayerSpec&, Precision) {
  return std::make_unique<GpuPositionalEmbedding>();
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeTiedHead(const LayerSpec&,
                                                       Precision) {
  return std::make_unique<GpuTiedHead>();
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kEmbedding, &MakeEmbedding);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kPositionalEmbedding,
                          &MakePositionalEmbedding);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kTiedLmHead, &MakeTiedHead);

}  // namespace cohort
