// LayerSpec.prelu as ONNX: PRelu, whose slope broadcasts from the right
// (numpy's rule): one slope per channel is reshaped to [C, 1] or
// [C, 1, 1] so that it lines up with axis 1 of [N, C, L] or [N, C, H, W];
// [F] already lines up with [N, F], and one shared slope [1] with anything.
// The initializer keeps the parameter's own shape and name.
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportPrelu(GraphBuilder& g, const LayerSpec&,
                                        const OnnxLayerIo& io) {
  ASSIGN_OR_RETURN(std::string slope, g.Param(io.prefix + ".weight"));
  const int64_t n = g.ShapeOf(io.prefix + ".weight")[0];
  if (n > 1 && io.in_shape.size() > 1) {
    std::vector<int64_t> planes(io.in_shape.size(), 1);
    planes[0] = n;
    slope = g.Binary("Reshape", slope, g.Int64s(planes));
  }
  return g.Binary("PRelu", io.in, slope);
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kPrelu, &ExportPrelu, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
