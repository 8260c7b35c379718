// LayerSpec.flatten as ONNX: Flatten.
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportFlatten(GraphBuilder& g, const LayerSpec&,
                                          const OnnxLayerIo& io) {
  std::string out;
  GraphBuilder::Int(g.Node("Flatten", {io.in}, &out), "axis", 1);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kFlatten, &ExportFlatten, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
