// LayerSpec.interaction as ONNX. DOT: the sample's 1 + T vectors as
// [N, 1 + T, dim], their Gram matrix by MatMul with the transpose, the
// strict lower triangle taken row by row with one Gather on the flattened
// matrix (DLRM's order), after the first vector. CAT: the input itself.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

// (i, j) for i = 1..vectors-1, j < i, as indices into the row-major
// flattened vectors x vectors matrix.
std::vector<int64_t> LowerTriangle(int64_t vectors) {
  std::vector<int64_t> at;
  for (int64_t i = 1; i < vectors; ++i) {
    for (int64_t j = 0; j < i; ++j) at.push_back(i * vectors + j);
  }
  return at;
}

std::string Dot(GraphBuilder& g, const std::string& in, int64_t vectors,
                int64_t dim) {
  std::string first;
  g.Node("Slice", {in, g.Int64s({0}), g.Int64s({dim}), g.Int64s({1})}, &first);
  if (vectors == 1) return first;
  const std::string v = g.Binary("Reshape", in, g.Int64s({0, vectors, dim}));
  std::string vt;
  GraphBuilder::Ints(g.Node("Transpose", {v}, &vt), "perm", {0, 2, 1});
  const std::string gram = g.Binary("Reshape", g.Binary("MatMul", v, vt),
                                    g.Int64s({0, vectors * vectors}));
  std::string pairs, out;
  GraphBuilder::Int(
      g.Node("Gather", {gram, g.Int64s(LowerTriangle(vectors))}, &pairs),
      "axis", 1);
  GraphBuilder::Int(g.Node("Concat", {first, pairs}, &out), "axis", 1);
  return out;
}

absl::StatusOr<std::string> ExportInteraction(GraphBuilder& g,
                                              const LayerSpec& l,
                                              const OnnxLayerIo& io) {
  const InteractionSpec& spec = l.interaction();
  if (spec.dim() <= 0 || io.in_shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", io.prefix, " (interaction) does not fit its input ",
        ShapeString(io.in_shape)));
  }
  if (spec.kind() == InteractionSpec::CAT) return g.Unary("Identity", io.in);
  return Dot(g, io.in, io.in_shape[0] / spec.dim(), spec.dim());
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kInteraction, &ExportInteraction,
                           nullptr);

}  // namespace onnx_internal
}  // namespace cohort
