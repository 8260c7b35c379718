// attention (multi-head self-attention over {D, L}, nn.MultiheadAttention's
// parameters) and transformer_block (pre-norm: x + attn(ln1(x)), then
// x + mlp(ln2(x))), which holds one.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::CheckSequence;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;
using spec_internal::UnitInterval;

absl::Status CheckAttention(const LayerSpec& l, const Scope& s) {
  const AttentionSpec& a = l.attention();
  RETURN_IF_ERROR(Positive(s, a, "heads", a.heads()));
  return UnitInterval(s, a, "dropout", a.dropout());
}

absl::Status CheckTransformerBlock(const LayerSpec& l, const Scope& s) {
  const TransformerBlockSpec& b = l.transformer_block();
  RETURN_IF_ERROR(Positive(s, b, "heads", b.heads()));
  RETURN_IF_ERROR(Require(b.mlp_ratio() >= 0 && b.mlp_ratio() <= 64, s, b,
                          "mlp_ratio", "in [1, 64] (0: 4)", b.mlp_ratio()));
  RETURN_IF_ERROR(UnitInterval(s, b, "dropout", b.dropout()));
  return NonNegative(s, b, "eps", b.eps());
}

absl::Status CheckHeads(int64_t heads, const Shape& in) {
  RETURN_IF_ERROR(CheckSequence(in));
  if (heads >= 1 && in[0] % heads == 0) return absl::OkStatus();
  return Unfit(absl::StrCat("heads (", heads, ") must divide the features (",
                            in[0], ")"));
}

// Attention's tensors (in_proj weight and bias, out_proj weight and bias)
// and what its forward keeps per sample: Q, K and V, the probabilities of
// every head, the heads' outputs and its output.
void AddAttention(int64_t heads, const Shape& in, InferredLayer* r) {
  const CheckedInt d = in[0], len = in[1];
  r->params.insert(r->params.end(), {d * d * 3, d * 3, d * d, d});
  r->no_decay.insert(r->no_decay.end(), {false, true, false, true});
  *r->activations += d * len * 5 + CheckedInt(heads) * len * len;
}

absl::StatusOr<InferredLayer> InferAttention(const LayerSpec& l,
                                             const Shape& in) {
  const AttentionSpec& a = l.attention();
  RETURN_IF_ERROR(CheckHeads(a.heads(), in));
  InferredLayer r;
  r.output = Checked(in);
  r.activations = 0;
  AddAttention(a.heads(), in, &r);
  return r;
}

// ln1, attention, ln2, mlp.0 and mlp.2, in that order
// (worker/layers/transformer_block.h).
absl::StatusOr<InferredLayer> InferTransformerBlock(const LayerSpec& l,
                                                    const Shape& in) {
  const TransformerBlockSpec& b = l.transformer_block();
  RETURN_IF_ERROR(CheckHeads(b.heads(), in));
  const CheckedInt d = in[0], len = in[1];
  const CheckedInt hidden = d * (b.mlp_ratio() > 0 ? b.mlp_ratio() : 4);
  InferredLayer r;
  r.output = Checked(in);
  r.activations = 0;
  r.params = {d, d};
  r.no_decay = {true, true};
  AddAttention(b.heads(), in, &r);
  r.params.insert(r.params.end(), {d, d, hidden * d, hidden, d * hidden, d});
  r.no_decay.insert(r.no_decay.end(), {true, true, false, true, false, true});
  // ln1, the first residual sum, ln2, the hidden layer before and after
  // GELU, and the output.
  *r.activations += d * len * 4 + hidden * len * 2;
  return r;
}

bool Sequence(const LayerSpec& l) { return true; }

const LayerKind kAttention = {"attention", CheckAttention, nullptr,
                              InferAttention, Sequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kAttention, kAttention);
const LayerKind kTransformerBlock = {"transformer_block", CheckTransformerBlock,
                                     nullptr, InferTransformerBlock, Sequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kTransformerBlock, kTransformerBlock);

}  // namespace
}  // namespace cohort
