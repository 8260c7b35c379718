// The kinds the GPU engine has no layer for yet: the recommendation
// models' slice, embedding_bag and interaction. Their makers refuse with a
// line naming the layer, so that a job asking for one on a GPU stops while
// its model is built, before any step, and says where it does run. A kind
// that gains a GPU layer moves to a file of its own under kinds/.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

template <const char* kKind>
absl::StatusOr<std::unique_ptr<GpuLayer>> Refuse(const LayerSpec& l,
                                                 Precision) {
  const std::string layer = l.name().empty()
                                ? std::string(kKind)
                                : absl::StrCat(kKind, " \"", l.name(), "\"");
  return absl::InvalidArgumentError(absl::StrCat(
      "layer ", layer, ": the GPU engine has no ", kKind,
      " layer; train this model on CPU devices (--devices=cpu:N)"));
}

constexpr char kSlice[] = "slice";
constexpr char kEmbeddingBag[] = "embedding_bag";
constexpr char kInteraction[] = "interaction";

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kSlice, &Refuse<kSlice>);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kEmbeddingBag, &Refuse<kEmbeddingBag>);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kInteraction, &Refuse<kInteraction>);

}  // namespace cohort
