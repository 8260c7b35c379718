// LayerSpec.residual as ONNX: Conv/BatchNormalization/Relu with an Add
// (GraphBuilder::Residual).
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportResidual(GraphBuilder& g, const LayerSpec& l,
                                           const OnnxLayerIo& io) {
  return g.Residual(io.in, io.prefix + ".", l.residual());
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kResidual, &ExportResidual, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
