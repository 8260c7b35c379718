// LayerSpec.linear as ONNX: Gemm.
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportLinear(GraphBuilder& g, const LayerSpec&,
                                         const OnnxLayerIo& io) {
  return g.Gemm(io.in, io.prefix + ".");
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kLinear, &ExportLinear, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
