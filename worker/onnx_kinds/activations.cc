// LayerSpec.relu, gelu, silu, tanh, sigmoid and leaky_relu as ONNX.
#include "common/model_sizes.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportRelu(GraphBuilder& g, const LayerSpec&,
                                       const OnnxLayerIo& io) {
  return g.Unary("Relu", io.in);
}

absl::StatusOr<std::string> ExportGelu(GraphBuilder& g, const LayerSpec& l,
                                       const OnnxLayerIo& io) {
  return g.Gelu(io.in, l.gelu().tanh_approximation());
}

absl::StatusOr<std::string> ExportSilu(GraphBuilder& g, const LayerSpec&,
                                       const OnnxLayerIo& io) {
  return g.Binary("Mul", io.in, g.Unary("Sigmoid", io.in));
}

absl::StatusOr<std::string> ExportTanh(GraphBuilder& g, const LayerSpec&,
                                       const OnnxLayerIo& io) {
  return g.Unary("Tanh", io.in);
}

absl::StatusOr<std::string> ExportSigmoid(GraphBuilder& g, const LayerSpec&,
                                          const OnnxLayerIo& io) {
  return g.Unary("Sigmoid", io.in);
}

absl::StatusOr<std::string> ExportLeakyRelu(GraphBuilder& g, const LayerSpec& l,
                                            const OnnxLayerIo& io) {
  std::string out;
  GraphBuilder::Float(g.Node("LeakyRelu", {io.in}, &out), "alpha",
                      static_cast<float>(LeakyReluSlope(l.leaky_relu())));
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kRelu, &ExportRelu, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kGelu, &ExportGelu, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kSilu, &ExportSilu, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kTanh, &ExportTanh, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kSigmoid, &ExportSigmoid, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kLeakyRelu, &ExportLeakyRelu, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
