// LayerSpec.branch as ONNX: each path a chain of nodes from the input (an
// empty one is the input), each added through AddLayer, then Concat along
// the channels (features), a chain of Adds, or a chain of Muls (ONNX's
// broadcasting scales [N, C, H, W] by a gate's [N, C, 1, 1]).
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/onnx_export.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

// Path `k` of branch `b` from `io.in`, in the channel-major layout.
absl::StatusOr<std::string> AddPath(GraphBuilder& g, const BranchSpec& b, int k,
                                    const OnnxLayerIo& io) {
  std::string cur = io.in;
  const std::vector<LayerSpec> path(b.paths(k).layers().begin(),
                                    b.paths(k).layers().end());
  ASSIGN_OR_RETURN(const std::vector<Shape> sizes,
                   OnnxLayerOutputs(path, io.in_shape));
  for (int j = 0; j < b.paths(k).layers_size(); ++j) {
    const Shape& sub_in = j == 0 ? io.in_shape : sizes[j - 1];
    ASSIGN_OR_RETURN(
        cur, AddLayer(g, b.paths(k).layers(j),
                      absl::StrCat(io.prefix, ".paths.", k, ".", j), cur,
                      sub_in, sizes[j]));
  }
  return g.ChannelMajor(cur);
}

absl::StatusOr<std::string> ExportBranch(GraphBuilder& g, const LayerSpec& l,
                                         const OnnxLayerIo& io) {
  const BranchSpec& b = l.branch();
  std::vector<std::string> outs;
  for (int k = 0; k < b.paths_size(); ++k) {
    ASSIGN_OR_RETURN(std::string out, AddPath(g, b, k, io));
    outs.push_back(std::move(out));
  }
  std::string out;
  if (b.combine() == BranchSpec::CONCAT) {
    GraphBuilder::Int(g.Node("Concat", outs, &out), "axis", 1);
    return out;
  }
  const char* op = b.combine() == BranchSpec::MUL ? "Mul" : "Add";
  out = outs[0];
  for (size_t k = 1; k < outs.size(); ++k) {
    out = g.Binary(op, out, outs[k]);
  }
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kBranch, &ExportBranch, nullptr);

}  // namespace onnx_internal
}  // namespace cohort
