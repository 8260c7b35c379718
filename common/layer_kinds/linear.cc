// linear: nn.Linear over the flattened sample, or at each position of a
// sequence (per_position).
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::CheckSequence;
using shape_inference::Unfit;
using spec_internal::Positive;
using spec_internal::Scope;

absl::Status CheckLinear(const LayerSpec& l, const Scope& s) {
  return Positive(s, l.linear(), "out_features", l.linear().out_features());
}

// The weight is {out, in} in both forms: `in` is the flat sample's
// features, or one position's. A per-position map keeps the length.
absl::StatusOr<InferredLayer> InferLinear(const LayerSpec& spec,
                                          const Shape& in) {
  const LinearSpec& l = spec.linear();
  if (l.out_features() <= 0) {
    return Unfit(
        absl::StrCat("out_features must be positive, got ", l.out_features()));
  }
  InferredLayer r;
  if (l.per_position()) {
    RETURN_IF_ERROR(CheckSequence(in));
    r.output = {l.out_features(), in[1]};
  } else if (in.size() == 1) {
    r.output = {l.out_features()};
  } else {
    return Unfit(absl::StrCat(
        "it expects a flat input {features}; put a flatten layer before it",
        in.size() == 2 ? " (or set per_position on a sequence {C, L})" : ""));
  }
  r.params.push_back(CheckedInt(l.out_features()) * in[0]);
  if (!l.no_bias()) r.params.push_back(l.out_features());
  return r;
}

bool LinearSequence(const LayerSpec& l) { return l.linear().per_position(); }

const LayerKind kLinear = {"linear", CheckLinear, nullptr, InferLinear,
                           LinearSequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kLinear, kLinear);

}  // namespace
}  // namespace cohort
