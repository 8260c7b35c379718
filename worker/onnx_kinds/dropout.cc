// LayerSpec.dropout as ONNX: no node, as inference makes it the identity.
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportDropout(GraphBuilder&, const LayerSpec&,
                                          const OnnxLayerIo& io) {
  return io.in;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kDropout, &ExportDropout, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
