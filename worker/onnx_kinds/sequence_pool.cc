// LayerSpec.sequence_pool as ONNX: ReduceMean over the positions of the
// channel-major [N, D, L] (the layout the layer takes, transposed from the
// transformer layers' sequence-major one where needed), giving [N, D].
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportSequencePool(GraphBuilder& g,
                                               const LayerSpec&,
                                               const OnnxLayerIo& io) {
  std::string out;
  onnx::NodeProto* n = g.Node("ReduceMean", {io.in}, &out);
  // Opset 17 takes the axes as an attribute.
  GraphBuilder::Ints(n, "axes", {2});
  GraphBuilder::Int(n, "keepdims", 0);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kSequencePool, &ExportSequencePool,
                           nullptr);

}  // namespace onnx_internal
}  // namespace cohort
