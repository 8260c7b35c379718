// Pre-norm transformer blocks in an imported layer list become
// transformer_block layers: a GPT's x + attn(ln_1(x)), then
// x + mlp(ln_2(x)), arrives as two SUM branches of layernorm, attention,
// per-position linears and GELU, which compute what one transformer_block
// computes, more slowly (each layer its own pass over the activations).
// The block's tensors keep the names the separate layers gave them,
// through LayerSpec.tensor_names.
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/tensor_names.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

using Layers = google::protobuf::RepeatedPtrField<LayerSpec>;

// The layers of a SUM branch's second path when its first is the identity.
const Layers* Residual(const LayerSpec& l) {
  if (!l.has_branch() || l.branch().combine() != BranchSpec::SUM ||
      l.branch().paths_size() != 2 || !l.branch().paths(0).layers().empty()) {
    return nullptr;
  }
  return &l.branch().paths(1).layers();
}

bool AffineNorm(const LayerSpec& l) {
  return l.has_layernorm() && l.layernorm().per_position() &&
         !l.layernorm().no_affine();
}

bool PositionLinear(const LayerSpec& l, int64_t out) {
  return l.has_linear() && l.linear().per_position() && !l.linear().no_bias() &&
         l.linear().out_features() == out;
}

// Dropout after a residual path's last layer: its p, or 0 without one.
bool TrailingDropout(const Layers& path, int body, float* p) {
  if (path.size() == body) return true;
  if (path.size() != body + 1 || !path[body].has_dropout()) return false;
  *p = path[body].dropout().p();
  return true;
}

// The transformer_block that layers `a` and `b` compute together, if any.
bool AsBlock(const LayerSpec& a, const LayerSpec& b,
             TransformerBlockSpec* block) {
  const Layers* attn = Residual(a);
  const Layers* mlp = Residual(b);
  if (attn == nullptr || mlp == nullptr || attn->size() < 2 ||
      mlp->size() < 4 || !AffineNorm((*attn)[0]) ||
      !(*attn)[1].has_attention() || !AffineNorm((*mlp)[0]) ||
      (*mlp)[0].layernorm().eps() != (*attn)[0].layernorm().eps() ||
      !(*mlp)[2].has_gelu() || (*mlp)[2].gelu().tanh_approximation()) {
    return false;
  }
  // The residual sum keeps the width: the MLP ends where it began.
  const int64_t dim = (*mlp)[3].linear().out_features();
  const int64_t hidden = (*mlp)[1].linear().out_features();
  if (dim <= 0 || hidden % dim != 0 || !PositionLinear((*mlp)[1], hidden) ||
      !PositionLinear((*mlp)[3], dim)) {
    return false;
  }
  const AttentionSpec& at = (*attn)[1].attention();
  float p_attn = at.dropout(), p_mlp = at.dropout();
  if (!TrailingDropout(*attn, 2, &p_attn) ||
      !TrailingDropout(*mlp, 4, &p_mlp) || p_attn != at.dropout() ||
      p_mlp != at.dropout()) {
    return false;
  }
  block->set_heads(at.heads());
  block->set_mlp_ratio(static_cast<int32_t>(hidden / dim));
  block->set_bidirectional(at.bidirectional());
  block->set_dropout(at.dropout());
  block->set_eps((*attn)[0].layernorm().eps());
  return true;
}

// The position name `name` after fusing layers `at` and `at + 1` into
// `at`: the block's own name ("5.ln1.weight") for the pair's tensors, one
// index less after them.
std::string Moved(const std::string& name, int at) {
  const int index = TopIndex(name);
  if (index < at) return name;
  const std::string tail = name.substr(name.find('.'));
  if (index > at + 1) return absl::StrCat(index - 1, tail);
  static const auto* parts =
      new std::map<std::string, std::string>{{"0.paths.1.0.", "ln1."},
                                             {"0.paths.1.1.", "attn."},
                                             {"1.paths.1.0.", "ln2."},
                                             {"1.paths.1.1.", "mlp.0."},
                                             {"1.paths.1.3.", "mlp.2."}};
  const std::string rest = absl::StrCat(index - at, tail);
  for (const auto& [from, to] : *parts) {
    if (absl::StartsWith(rest, from)) {
      return absl::StrCat(at, ".", to, rest.substr(from.size()));
    }
  }
  return name;
}

}  // namespace

int TopIndex(const std::string& name) {
  int index = -1;
  const size_t dot = name.find('.');
  if (dot == std::string::npos ||
      !absl::SimpleAtoi(name.substr(0, dot), &index)) {
    return -1;
  }
  return index;
}

void FuseTransformerBlocks(ModelSpec* model, std::vector<SafeTensor>* weights) {
  Layers& layers = *model->mutable_layers();
  for (int i = 0; i + 1 < layers.size(); ++i) {
    TransformerBlockSpec block;
    if (!AsBlock(layers[i], layers[i + 1], &block)) continue;
    // The names the pair's tensors would have had, kept for the block.
    const TensorNames before(
        std::vector<LayerSpec>(layers.begin(), layers.end()));
    LayerSpec fused;
    *fused.mutable_transformer_block() = block;
    const std::string prefix = absl::StrCat(i, ".");
    for (SafeTensor& w : *weights) {
      const int index = TopIndex(w.name);
      const std::string moved = Moved(w.name, i);
      if (index == i || index == i + 1) {
        (*fused.mutable_tensor_names())[moved.substr(prefix.size())] =
            before.Of(w.name);
      }
      w.name = moved;
    }
    layers[i] = std::move(fused);
    layers.DeleteSubrange(i + 1, 1);
  }
}

}  // namespace onnx_import_internal
}  // namespace cohort
