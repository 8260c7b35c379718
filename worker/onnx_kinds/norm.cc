// LayerSpec.layernorm and groupnorm as ONNX. A layer norm over the whole
// sample is channel-major; one per position (per_position) is a sequence
// layer, normalising the last axis of the sequence-major layout.
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

float LayerNormEps(const LayerNormSpec& s) {
  return s.eps() > 0 ? s.eps() : 1e-5f;
}

absl::StatusOr<std::string> ExportLayerNorm(GraphBuilder& g, const LayerSpec& l,
                                            const OnnxLayerIo& io) {
  // Over the whole per-sample shape: axes 1.. of [N, *shape].
  return g.LayerNorm(io.in, io.prefix + ".", io.out_shape, 1,
                     LayerNormEps(l.layernorm()));
}

absl::StatusOr<std::string> ExportPerPositionLayerNorm(GraphBuilder& g,
                                                       const LayerSpec& l,
                                                       const OnnxLayerIo& io) {
  ASSIGN_OR_RETURN(
      std::string out,
      g.LayerNorm(g.SequenceMajor(io.in), io.prefix + ".", {io.in_shape[0]}, -1,
                  LayerNormEps(l.layernorm())));
  g.MarkSequence(out);
  return out;
}

absl::StatusOr<std::string> ExportGroupNorm(GraphBuilder& g, const LayerSpec& l,
                                            const OnnxLayerIo& io) {
  const GroupNormSpec& s = l.groupnorm();
  return g.GroupNorm(io.in, io.prefix + ".", io.out_shape, s.groups(),
                     s.eps() > 0 ? s.eps() : 1e-5f);
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kLayernorm, &ExportLayerNorm,
                           &ExportPerPositionLayerNorm);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kGroupnorm, &ExportGroupNorm, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
