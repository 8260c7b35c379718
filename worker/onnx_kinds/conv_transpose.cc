// LayerSpec.conv_transpose2d as ONNX: ConvTranspose, whose output size
// (stride * (H - 1) + output_padding + K - 2 * padding) is PyTorch's.
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportConvTranspose(GraphBuilder& g,
                                                const LayerSpec& l,
                                                const OnnxLayerIo& io) {
  const ConvTransposeSpec& c = l.conv_transpose2d();
  std::vector<std::string> inputs = {io.in};
  ASSIGN_OR_RETURN(std::string weight, g.Param(io.prefix + ".weight"));
  inputs.push_back(weight);
  if (g.Has(io.prefix + ".bias")) {
    ASSIGN_OR_RETURN(std::string bias, g.Param(io.prefix + ".bias"));
    inputs.push_back(bias);
  }
  const int64_t k = c.kernel(), s = c.stride() > 0 ? c.stride() : 1;
  const int64_t p = c.padding(), op = c.output_padding();
  std::string out;
  onnx::NodeProto* n = g.Node("ConvTranspose", inputs, &out);
  GraphBuilder::Ints(n, "kernel_shape", {k, k});
  GraphBuilder::Ints(n, "strides", {s, s});
  GraphBuilder::Ints(n, "pads", {p, p, p, p});
  if (op > 0) GraphBuilder::Ints(n, "output_padding", {op, op});
  if (c.groups() > 1) GraphBuilder::Int(n, "group", c.groups());
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kConvTranspose2D, &ExportConvTranspose,
                           nullptr);

}  // namespace onnx_internal
}  // namespace cohort
