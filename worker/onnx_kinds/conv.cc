// LayerSpec.conv1d and conv2d as ONNX: Conv, with per-dim kernel_shape,
// strides and pads ([top, left, bottom, right]) for conv2d's rectangular
// windows and padding SAME.
#include <string>
#include <vector>

#include "common/conv_window.h"
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

// Explicit pads rather than auto_pad SAME_UPPER, which ONNX keeps only for
// legacy graphs: the pads say exactly what the layer does.
absl::StatusOr<std::string> WindowConv(GraphBuilder& g, const ConvSpec& c,
                                       const ConvWindow& w,
                                       const OnnxLayerIo& io) {
  std::vector<std::string> inputs = {io.in};
  ASSIGN_OR_RETURN(std::string weight, g.Param(io.prefix + ".weight"));
  inputs.push_back(weight);
  if (g.Has(io.prefix + ".bias")) {
    ASSIGN_OR_RETURN(std::string bias, g.Param(io.prefix + ".bias"));
    inputs.push_back(bias);
  }
  std::string out;
  onnx::NodeProto* n = g.Node("Conv", inputs, &out);
  GraphBuilder::Ints(n, "kernel_shape", {w.kernel_h, w.kernel_w});
  GraphBuilder::Ints(n, "strides", {w.stride_h, w.stride_w});
  GraphBuilder::Ints(n, "pads",
                     {w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
  if (c.groups() > 1) GraphBuilder::Int(n, "group", c.groups());
  if (w.dilation > 1) {
    GraphBuilder::Ints(n, "dilations", {w.dilation, w.dilation});
  }
  return out;
}

absl::StatusOr<std::string> ExportConv(GraphBuilder& g, const LayerSpec& l,
                                       const OnnxLayerIo& io) {
  const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
  if (l.has_conv2d() && UsesConv2dFields(c)) {
    return WindowConv(g, c, ResolveConvWindow(c, 2), io);
  }
  return g.Conv(io.in, io.prefix, c.stride() > 0 ? c.stride() : 1, c.padding(),
                c.groups() > 0 ? c.groups() : 1,
                c.dilation() > 0 ? c.dilation() : 1);
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kConv1D, &ExportConv, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kConv2D, &ExportConv, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
