// The CPU engine's embedding_bag (LayerSpec.embedding_bag).
#include "worker/layers/embedding_bag.h"

#include <vector>

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeEmbeddingBag(const LayerSpec& l) {
  const EmbeddingBagSpec& e = l.embedding_bag();
  return std::make_unique<EmbeddingBag<T>>(
      std::vector<int64_t>(e.rows().begin(), e.rows().end()), e.dim(),
      e.mode() == EmbeddingBagSpec::MEAN ? EmbeddingBagMode::kMean
                                         : EmbeddingBagMode::kSum,
      e.sparse());
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kEmbeddingBag, MakeEmbeddingBag);

}  // namespace cohort
