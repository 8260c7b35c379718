// LayerSpec.to_sequence as ONNX: Reshape [N, C, H, W] -> [N, C, H * W],
// the channel-major sequence; the transformer layers after it transpose it
// to sequence-major once (worker/onnx_graph.h).
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportToSequence(GraphBuilder& g, const LayerSpec&,
                                             const OnnxLayerIo& io) {
  // 0 keeps the input's batch dimension.
  return g.Binary("Reshape", io.in,
                  g.Int64s({0, io.out_shape[0], io.out_shape[1]}));
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kToSequence, &ExportToSequence, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
