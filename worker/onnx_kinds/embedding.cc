// LayerSpec.embedding, positional_embedding and tied_lm_head as ONNX:
// sequence layers. The tied head multiplies by the model's first
// embedding's initializer (shared, not duplicated).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportEmbedding(GraphBuilder& g, const LayerSpec&,
                                            const OnnxLayerIo& io) {
  const std::string p = io.prefix + ".";
  // Float ids [N, 1, L] -> int64 [N, L] -> rows of the table [N, L, D].
  std::string ids, out;
  GraphBuilder::Int(g.Node("Cast", {io.in}, &ids), "to",
                    onnx::TensorProto::INT64);
  ids = g.Binary("Squeeze", ids, g.Int64s({1}));
  ASSIGN_OR_RETURN(std::string w, g.Param(p + "weight"));
  GraphBuilder::Int(g.Node("Gather", {w, ids}, &out), "axis", 0);
  g.MarkSequence(out);
  if (g.embedding().empty()) g.set_embedding(p);
  return out;
}

absl::StatusOr<std::string> ExportPositionalEmbedding(GraphBuilder& g,
                                                      const LayerSpec&,
                                                      const OnnxLayerIo& io) {
  // The table {L, D} broadcasts over the batch of [N, L, D].
  ASSIGN_OR_RETURN(std::string w, g.Param(io.prefix + ".weight"));
  const std::string out = g.Binary("Add", g.SequenceMajor(io.in), w);
  g.MarkSequence(out);
  return out;
}

absl::StatusOr<std::string> ExportTiedLmHead(GraphBuilder& g, const LayerSpec&,
                                             const OnnxLayerIo& io) {
  // E {V, D} times each sample's [D, L]: MatMul broadcasts E over the
  // batch and gives the engine's [N, V, L] directly.
  if (g.embedding().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", io.prefix, " (tied_lm_head) has no embedding before it"));
  }
  ASSIGN_OR_RETURN(std::string e, g.Param(g.embedding() + "weight"));
  return g.Binary("MatMul", e, g.ChannelMajor(io.in));
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kEmbedding, nullptr, &ExportEmbedding);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kPositionalEmbedding, nullptr,
                           &ExportPositionalEmbedding);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kTiedLmHead, nullptr, &ExportTiedLmHead);

}  // namespace onnx_internal
}  // namespace cohort
