// LayerSpec.relu6, hardsigmoid and hardswish as ONNX: Clip(0, 6),
// HardSigmoid with PyTorch's slope and offset, and HardSwish (opset 14).
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportRelu6(GraphBuilder& g, const LayerSpec&,
                                        const OnnxLayerIo& io) {
  std::string out;
  g.Node("Clip", {io.in, g.Scalar(0.0f), g.Scalar(6.0f)}, &out);
  return out;
}

absl::StatusOr<std::string> ExportHardsigmoid(GraphBuilder& g, const LayerSpec&,
                                              const OnnxLayerIo& io) {
  std::string out;
  onnx::NodeProto* n = g.Node("HardSigmoid", {io.in}, &out);
  GraphBuilder::Float(n, "alpha", 1.0f / 6.0f);
  GraphBuilder::Float(n, "beta", 0.5f);
  return out;
}

absl::StatusOr<std::string> ExportHardswish(GraphBuilder& g, const LayerSpec&,
                                            const OnnxLayerIo& io) {
  return g.Unary("HardSwish", io.in);
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kRelu6, &ExportRelu6, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kHardsigmoid, &ExportHardsigmoid,
                           nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kHardswish, &ExportHardswish, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
