// The transformer layers' ONNX form. Between these layers values
// stay sequence-major, [N, L, D] (see worker/onnx_graph.h), so a stack of
// blocks carries no Transpose; position-wise linear maps are Gemm over the
// [N * L, D] rows, as nn.Linear on [N, L, D] computes them.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/onnx_graph.h"

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

}  // namespace

bool IsSequenceLayer(const LayerSpec& l) {
  switch (l.kind_case()) {
    case LayerSpec::kEmbedding:
    case LayerSpec::kPositionalEmbedding:
    case LayerSpec::kAttention:
    case LayerSpec::kTransformerBlock:
    case LayerSpec::kTiedLmHead:
      return true;
    case LayerSpec::kLayernorm:
      return l.layernorm().per_position();
    default:
      return false;
  }
}

absl::StatusOr<Shape> SequenceLayerOutput(const LayerSpec& l,
                                          const Shape& in_shape,
                                          int64_t vocab) {
  if (in_shape.size() != 2) {
    return absl::InvalidArgumentError(
        "a transformer layer takes per-sample {features, length} inputs");
  }
  if (l.has_embedding()) return Shape{l.embedding().dim(), in_shape[1]};
  if (l.has_tied_lm_head()) {
    if (vocab <= 0) {
      return absl::InvalidArgumentError(
          "tied_lm_head needs an embedding layer before it");
    }
    return Shape{vocab, in_shape[1]};
  }
  return in_shape;
}

absl::StatusOr<std::string> AddSequenceLayer(GraphBuilder& g,
                                             const LayerSpec& l,
                                             const std::string& prefix,
                                             const std::string& in,
                                             const Shape& in_shape) {
  const std::string p = prefix + ".";
  const int64_t d = in_shape[0], len = in_shape.size() > 1 ? in_shape[1] : 0;
  switch (l.kind_case()) {
    case LayerSpec::kEmbedding: {
      // Float ids [N, 1, L] -> int64 [N, L] -> rows of the table [N, L, D].
      std::string ids, out;
      GraphBuilder::Int(g.Node("Cast", {in}, &ids), "to",
                        onnx::TensorProto::INT64);
      ids = g.Binary("Squeeze", ids, g.Int64s({1}));
      ASSIGN_OR_RETURN(std::string w, g.Param(p + "weight"));
      GraphBuilder::Int(g.Node("Gather", {w, ids}, &out), "axis", 0);
      g.MarkSequence(out);
      if (g.embedding().empty()) g.set_embedding(p);
      return out;
    }
    case LayerSpec::kPositionalEmbedding: {
      // The table {L, D} broadcasts over the batch of [N, L, D].
      ASSIGN_OR_RETURN(std::string w, g.Param(p + "weight"));
      const std::string out = g.Binary("Add", g.SequenceMajor(in), w);
      g.MarkSequence(out);
      return out;
    }
    case LayerSpec::kLayernorm: {
      const LayerNormSpec& s = l.layernorm();
      ASSIGN_OR_RETURN(std::string out,
                       g.LayerNorm(g.SequenceMajor(in), p, {d}, -1,
                                   s.eps() > 0 ? s.eps() : 1e-5f));
      g.MarkSequence(out);
      return out;
    }
    case LayerSpec::kAttention: {
      const AttentionSpec& s = l.attention();
      return Attention(g, g.SequenceMajor(in), p, d, len, s.heads(),
                       !s.bidirectional());
    }
    case LayerSpec::kTransformerBlock:
      return Block(g, g.SequenceMajor(in), p, d, len, l.transformer_block());
    case LayerSpec::kTiedLmHead: {
      // E {V, D} times each sample's [D, L]: MatMul broadcasts E over the
      // batch and gives the engine's [N, V, L] directly.
      if (g.embedding().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer ", prefix, " (tied_lm_head) has no embedding before it"));
      }
      ASSIGN_OR_RETURN(std::string e, g.Param(g.embedding() + "weight"));
      return g.Binary("MatMul", e, g.ChannelMajor(in));
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", prefix, " is not a transformer layer"));
  }
}

}  // namespace onnx_internal
}  // namespace cohort
