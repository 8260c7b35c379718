// LayerSpec.embedding_bag as ONNX: the row ids rebuilt in int64 from their
// float pairs (hi * 2^24 + lo), then one Gather per table and a Concat, so
// that [N, 2 T] ids give [N, T dim] as the engine does. Tables are the
// initializers "<prefix>.<t>.weight".
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

// Every other column of int64 [N, 2 T] from `first`: [N, T].
std::string EveryOther(GraphBuilder& g, const std::string& ids, int64_t first,
                       int64_t tables) {
  std::string out;
  g.Node("Slice",
         {ids, g.Int64s({first}), g.Int64s({2 * tables}), g.Int64s({1}),
          g.Int64s({2})},
         &out);
  return out;
}

absl::StatusOr<std::string> ExportEmbeddingBag(GraphBuilder& g,
                                               const LayerSpec& l,
                                               const OnnxLayerIo& io) {
  const int64_t tables = l.embedding_bag().rows_size();
  if (tables == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", io.prefix, " (embedding_bag) has no tables"));
  }
  if (l.embedding_bag().sparse()) {
    // The rows are on the parameter-server shards, not in the model file.
    return absl::UnimplementedError(absl::StrCat(
        "layer ", io.prefix,
        " (embedding_bag) has sparse tables, which live on the "
        "parameter-server shards: a model with them cannot be exported"));
  }
  std::string ids;
  GraphBuilder::Int(g.Node("Cast", {io.in}, &ids), "to",
                    onnx::TensorProto::INT64);
  const std::string hi = EveryOther(g, ids, 0, tables);
  const std::string lo = EveryOther(g, ids, 1, tables);
  const std::string rows =
      g.Binary("Add", g.Binary("Mul", hi, g.Int64Scalar(int64_t{1} << 24)), lo);
  std::vector<std::string> parts;
  for (int64_t t = 0; t < tables; ++t) {
    ASSIGN_OR_RETURN(const std::string w,
                     g.Param(absl::StrCat(io.prefix, ".", t, ".weight")));
    std::string column, part;
    GraphBuilder::Int(g.Node("Gather", {rows, g.Int64Scalar(t)}, &column),
                      "axis", 1);
    GraphBuilder::Int(g.Node("Gather", {w, column}, &part), "axis", 0);
    parts.push_back(part);
  }
  if (tables == 1) return parts[0];
  std::string out;
  GraphBuilder::Int(g.Node("Concat", parts, &out), "axis", 1);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kEmbeddingBag, &ExportEmbeddingBag,
                           nullptr);

}  // namespace onnx_internal
}  // namespace cohort
