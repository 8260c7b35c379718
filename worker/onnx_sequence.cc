// Which layers the ONNX export carries in the sequence-major layout
// ([N, L, D], see worker/onnx_graph.h), and their output shapes, which the
// exporter works out itself. The layers' nodes are in worker/onnx_kinds/.
#include "common/layer_kind.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {

bool IsSequenceLayer(const LayerSpec& l) {
  const LayerKind* k = FindLayerKind(l);
  return k && k->sequence && k->sequence(l);
}

absl::StatusOr<Shape> SequenceLayerOutput(const LayerSpec& l,
                                          const Shape& in_shape,
                                          int64_t vocab) {
  if (in_shape.size() != 2) {
    return absl::InvalidArgumentError(
        "a transformer layer takes per-sample {features, length} inputs");
  }
  if (l.has_embedding()) return Shape{l.embedding().dim(), in_shape[1]};
  if (l.has_linear()) return Shape{l.linear().out_features(), in_shape[1]};
  if (l.has_tied_lm_head()) {
    if (vocab <= 0) {
      return absl::InvalidArgumentError(
          "tied_lm_head needs an embedding layer before it");
    }
    return Shape{vocab, in_shape[1]};
  }
  return in_shape;
}

}  // namespace onnx_internal
}  // namespace cohort
