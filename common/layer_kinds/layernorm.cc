// layernorm: nn.LayerNorm over each sample's whole shape, or over each
// position's features of a sequence (per_position).
#include "absl/status/status.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::CheckSequence;
using shape_inference::Elements;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Scope;

absl::Status CheckLayerNorm(const LayerSpec& l, const Scope& s) {
  // 0 is the default (1e-5); a negative eps would divide by zero.
  return NonNegative(s, l.layernorm(), "eps", l.layernorm().eps());
}

void FillLayerNorm(LayerSpec* l) {
  if (l->layernorm().eps() == 0) l->mutable_layernorm()->set_eps(1e-5f);
}

// Weight and bias have the normalized shape: the sample's, or one
// position's features.
absl::StatusOr<InferredLayer> InferLayerNorm(const LayerSpec& l,
                                             const Shape& in) {
  const LayerNormSpec& n = l.layernorm();
  Shape normalized = in;
  if (n.per_position()) {
    RETURN_IF_ERROR(CheckSequence(in));
    normalized = {in[0]};
  }
  if (normalized.empty() || normalized.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  InferredLayer r;
  r.output = Checked(in);
  if (!n.no_affine()) {
    const CheckedInt elements = Elements(Checked(normalized));
    r.params = {elements, elements};
  }
  return r;
}

bool LayerNormSequence(const LayerSpec& l) {
  return l.layernorm().per_position();
}

const LayerKind kLayerNorm = {"layernorm", CheckLayerNorm, FillLayerNorm,
                              InferLayerNorm, LayerNormSequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kLayernorm, kLayerNorm);

}  // namespace
}  // namespace cohort
