// LayerSpec.slice as ONNX: Slice of the features (axis 1) of [N, F].
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportSlice(GraphBuilder& g, const LayerSpec& l,
                                        const OnnxLayerIo& io) {
  std::string out;
  g.Node("Slice",
         {io.in, g.Int64s({l.slice().begin()}), g.Int64s({l.slice().end()}),
          g.Int64s({1})},
         &out);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kSlice, &ExportSlice, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
