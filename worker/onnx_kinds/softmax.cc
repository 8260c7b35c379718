// LayerSpec.softmax as ONNX: Softmax along axis 1 of [N, F], [N, C, L] or
// [N, C, H, W]. From opset 13 on, Softmax normalises that one axis (before
// it, it flattened every axis from `axis` on); the exporter writes opset
// 17 (worker/onnx_export.h).
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

static_assert(kOnnxOpset >= 13, "Softmax must normalise one axis");

absl::StatusOr<std::string> ExportSoftmax(GraphBuilder& g, const LayerSpec&,
                                          const OnnxLayerIo& io) {
  std::string out;
  GraphBuilder::Int(g.Node("Softmax", {io.in}, &out), "axis", 1);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kSoftmax, &ExportSoftmax, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
