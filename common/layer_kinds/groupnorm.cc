// groupnorm: nn.GroupNorm, a weight and bias per channel (a flat input's
// features), the groups dividing the channels.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Positive;
using spec_internal::Scope;

absl::Status CheckGroupNorm(const LayerSpec& l, const Scope& s) {
  const GroupNormSpec& g = l.groupnorm();
  RETURN_IF_ERROR(Positive(s, g, "groups", g.groups()));
  return NonNegative(s, g, "eps", g.eps());
}

void FillGroupNorm(LayerSpec* l) {
  if (l->groupnorm().eps() == 0) l->mutable_groupnorm()->set_eps(1e-5f);
}

absl::StatusOr<InferredLayer> InferGroupNorm(const LayerSpec& l,
                                             const Shape& in) {
  const GroupNormSpec& g = l.groupnorm();
  if (g.groups() < 1) {
    return Unfit(absl::StrCat("groups must be positive, got ", g.groups()));
  }
  if (in.empty() || in.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  if (in[0] % g.groups() != 0) {
    return Unfit(absl::StrCat("groups (", g.groups(),
                              ") must divide the channels (", in[0], ")"));
  }
  InferredLayer r;
  r.output = Checked(in);
  if (!g.no_affine()) r.params = {in[0], in[0]};
  return r;
}

const LayerKind kGroupNorm = {"groupnorm", CheckGroupNorm, FillGroupNorm,
                              InferGroupNorm};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kGroupnorm, kGroupNorm);

}  // namespace
}  // namespace cohort
