// The CPU engine's embeddings and the tied head (LayerSpec.embedding,
// positional_embedding and tied_lm_head). worker/model.h ties the head to
// the model's first embedding.
#include "worker/layers/embedding.h"

#include "worker/layer_registry.h"
#include "worker/layers/tied_lm_head.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeEmbedding(const LayerSpec& l) {
  return std::make_unique<Embedding<T>>(l.embedding().vocab_size(),
                                        l.embedding().dim());
}

template <typename T>
std::unique_ptr<Layer<T>> MakePositionalEmbedding(const LayerSpec&) {
  return std::make_unique<PositionalEmbedding<T>>();
}

template <typename T>
std::unique_ptr<Layer<T>> MakeTiedLmHead(const LayerSpec&) {
  return std::make_unique<TiedLmHead<T>>();
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kEmbedding, MakeEmbedding);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kPositionalEmbedding,
                          MakePositionalEmbedding);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kTiedLmHead, MakeTiedLmHead);

}  // namespace cohort
