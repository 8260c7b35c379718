// LayerSpec.global_avgpool as ONNX: GlobalAveragePool, then Flatten.
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportGlobalAvgPool(GraphBuilder& g,
                                                const LayerSpec&,
                                                const OnnxLayerIo& io) {
  std::string pooled = g.Unary("GlobalAveragePool", io.in);
  // cohort's global pool gives [C]; ONNX's keeps [C, 1, 1].
  if (io.out_shape.size() == 1) {
    std::string out;
    GraphBuilder::Int(g.Node("Flatten", {pooled}, &out), "axis", 1);
    return out;
  }
  return pooled;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kGlobalAvgpool, &ExportGlobalAvgPool,
                           nullptr);

}  // namespace onnx_internal
}  // namespace cohort
