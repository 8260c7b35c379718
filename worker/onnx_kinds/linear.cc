// LayerSpec.linear as ONNX: Gemm over the flattened sample, or, per
// position, a sequence layer: Gemm over the [N * L, C] rows of the
// sequence-major [N, L, C] value, as nn.Linear on [N, L, C] computes it
// (and as the attention layers' projections are exported).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportLinear(GraphBuilder& g, const LayerSpec&,
                                         const OnnxLayerIo& io) {
  return g.Gemm(io.in, io.prefix + ".");
}

absl::StatusOr<std::string> ExportPerPositionLinear(GraphBuilder& g,
                                                    const LayerSpec& l,
                                                    const OnnxLayerIo& io) {
  if (io.in_shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", io.prefix,
                     ": a per-position linear takes per-sample {features, "
                     "length} inputs"));
  }
  const int64_t features = io.in_shape[0], length = io.in_shape[1];
  const std::string rows =
      g.Binary("Reshape", g.SequenceMajor(io.in), g.Int64s({-1, features}));
  ASSIGN_OR_RETURN(const std::string y, g.Gemm(rows, io.prefix + "."));
  const std::string out =
      g.Binary("Reshape", y, g.Int64s({-1, length, l.linear().out_features()}));
  g.MarkSequence(out);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kLinear, &ExportLinear,
                           &ExportPerPositionLinear);

}  // namespace onnx_internal
}  // namespace cohort
