// LayerSpec.conv1d and conv2d as ONNX: Conv.
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportConv(GraphBuilder& g, const LayerSpec& l,
                                       const OnnxLayerIo& io) {
  const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
  return g.Conv(io.in, io.prefix, c.stride() > 0 ? c.stride() : 1, c.padding(),
                c.groups() > 0 ? c.groups() : 1,
                c.dilation() > 0 ? c.dilation() : 1);
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kConv1D, &ExportConv, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kConv2D, &ExportConv, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
