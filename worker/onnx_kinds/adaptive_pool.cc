// LayerSpec.adaptive_avgpool2d as ONNX, which has no adaptive pool:
// GlobalAveragePool for output 1 (keeping [C, 1, 1], as cohort's layer),
// AveragePool with kernel = stride = the input over the output where the
// output divides the input (then the windows are exactly those), and no
// form otherwise.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportAdaptiveAvgPool2d(GraphBuilder& g,
                                                    const LayerSpec& l,
                                                    const OnnxLayerIo& io) {
  const int64_t k = l.adaptive_avgpool2d().output();
  if (k == 1) return g.Unary("GlobalAveragePool", io.in);
  const Shape& in = io.in_shape;
  if (in.size() != 3 || k < 1 || in[1] % k != 0 || in[2] % k != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "layer ", io.prefix, ": adaptive_avgpool2d { output: ", k, " } on ",
        ShapeString(in),
        " has no ONNX form: it needs the input's height and width divisible "
        "by the output (or output 1)"));
  }
  const int64_t kh = in[1] / k, kw = in[2] / k;
  std::string out;
  onnx::NodeProto* n = g.Node("AveragePool", {io.in}, &out);
  GraphBuilder::Ints(n, "kernel_shape", {kh, kw});
  GraphBuilder::Ints(n, "strides", {kh, kw});
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kAdaptiveAvgpool2D,
                           &ExportAdaptiveAvgPool2d, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
