// LayerSpec.attention and transformer_block as ONNX: sequence layers.
// Between them values stay sequence-major, [N, L, D] (see
// worker/onnx_graph.h), so a stack of blocks carries no Transpose;
// position-wise linear maps are Gemm over the [N * L, D] rows, as
// nn.Linear on [N, L, D] computes them.
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

// [N, L, D] -> [N * L, D], and back to [N, L, width].
std::string Rows(GraphBuilder& g, const std::string& x, int64_t d) {
  return g.Binary("Reshape", x, g.Int64s({-1, d}));
}
std::string Unrows(GraphBuilder& g, const std::string& x, int64_t l,
                   int64_t width) {
  const std::string out = g.Binary("Reshape", x, g.Int64s({-1, l, width}));
  g.MarkSequence(out);
  return out;
}

// nn.MultiheadAttention(D, H, batch_first=True)(x, x, x, need_weights=False)
// on sequence-major x, parameters `p`in_proj_weight ... `p`out_proj.bias.
absl::StatusOr<std::string> Attention(GraphBuilder& g, const std::string& x,
                                      const std::string& p, int64_t d,
                                      int64_t l, int64_t heads, bool causal) {
  if (heads <= 0 || d % heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", p, ": ", heads, " heads do not divide ", d, " features"));
  }
  const int64_t hd = d / heads;
  ASSIGN_OR_RETURN(std::string qkv, g.Gemm(Rows(g, x, d), p + "in_proj_"));
  // [N*L, 3D] -> [N, L, 3, H, hd] -> [3, N, H, L, hd]: rows Q, K, V, and
  // head h at columns h*hd.. of each, as MultiheadAttention splits them.
  qkv = g.Binary("Reshape", qkv, g.Int64s({-1, l, 3, heads, hd}));
  std::string split;
  GraphBuilder::Ints(g.Node("Transpose", {qkv}, &split), "perm",
                     {2, 0, 3, 1, 4});
  std::string q, k, v, kt;
  g.Node("Gather", {split, g.Int64Scalar(0)}, &q);
  g.Node("Gather", {split, g.Int64Scalar(1)}, &k);
  g.Node("Gather", {split, g.Int64Scalar(2)}, &v);
  GraphBuilder::Ints(g.Node("Transpose", {k}, &kt), "perm", {0, 1, 3, 2});
  std::string scores = g.Binary(
      "Mul", g.Binary("MatMul", q, kt),
      g.Scalar(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))));
  if (causal) {
    std::vector<float> mask(l * l, 0.0f);
    for (int64_t i = 0; i < l; ++i) {
      for (int64_t j = i + 1; j < l; ++j) {
        mask[i * l + j] = -std::numeric_limits<float>::infinity();
      }
    }
    scores = g.Binary("Add", scores, g.Floats({l, l}, mask));
  }
  std::string probs, merged;
  GraphBuilder::Int(g.Node("Softmax", {scores}, &probs), "axis", -1);
  // [N, H, L, hd] -> [N, L, H, hd] -> [N*L, D].
  GraphBuilder::Ints(
      g.Node("Transpose", {g.Binary("MatMul", probs, v)}, &merged), "perm",
      {0, 2, 1, 3});
  ASSIGN_OR_RETURN(
      std::string out,
      g.Gemm(g.Binary("Reshape", merged, g.Int64s({-1, d})), p + "out_proj."));
  return Unrows(g, out, l, d);
}

// The pre-norm GPT block of worker/layers (x + attn(ln1(x)), then
// h + mlp(ln2(h))), dropout being the identity here.
absl::StatusOr<std::string> Block(GraphBuilder& g, const std::string& x,
                                  const std::string& p, int64_t d, int64_t l,
                                  const TransformerBlockSpec& s) {
  const float eps = s.eps() > 0 ? s.eps() : 1e-5f;
  ASSIGN_OR_RETURN(std::string a, g.LayerNorm(x, p + "ln1.", {d}, -1, eps));
  ASSIGN_OR_RETURN(
      a, Attention(g, a, p + "attn.", d, l, s.heads(), !s.bidirectional()));
  const std::string h = g.Binary("Add", x, a);
  ASSIGN_OR_RETURN(std::string m, g.LayerNorm(h, p + "ln2.", {d}, -1, eps));
  ASSIGN_OR_RETURN(m, g.Gemm(Rows(g, m, d), p + "mlp.0."));
  m = g.Gelu(m, false);
  ASSIGN_OR_RETURN(m, g.Gemm(m, p + "mlp.2."));
  const std::string y = g.Binary("Add", h, Unrows(g, m, l, d));
  g.MarkSequence(y);
  return y;
}

// The features and the length of a sequence layer's {D, L} input.
int64_t Features(const OnnxLayerIo& io) { return io.in_shape[0]; }
int64_t Length(const OnnxLayerIo& io) {
  return io.in_shape.size() > 1 ? io.in_shape[1] : 0;
}

absl::StatusOr<std::string> ExportAttention(GraphBuilder& g, const LayerSpec& l,
                                            const OnnxLayerIo& io) {
  const AttentionSpec& s = l.attention();
  return Attention(g, g.SequenceMajor(io.in), io.prefix + ".", Features(io),
                   Length(io), s.heads(), !s.bidirectional());
}

absl::StatusOr<std::string> ExportTransformerBlock(GraphBuilder& g,
                                                   const LayerSpec& l,
                                                   const OnnxLayerIo& io) {
  return Block(g, g.SequenceMajor(io.in), io.prefix + ".", Features(io),
               Length(io), l.transformer_block());
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kAttention, nullptr, &ExportAttention);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kTransformerBlock, nullptr,
                           &ExportTransformerBlock);

}  // namespace onnx_internal
}  // namespace cohort
