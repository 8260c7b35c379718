// linear: nn.Linear over the flattened sample.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"

namespace cohort {
namespace {

using shape_inference::Unfit;
using spec_internal::Positive;
using spec_internal::Scope;

absl::Status CheckLinear(const LayerSpec& l, const Scope& s) {
  return Positive(s, l.linear(), "out_features", l.linear().out_features());
}

absl::StatusOr<InferredLayer> InferLinear(const LayerSpec& spec,
                                          const Shape& in) {
  const LinearSpec& l = spec.linear();
  if (l.out_features() <= 0) {
    return Unfit(
        absl::StrCat("out_features must be positive, got ", l.out_features()));
  }
  if (in.size() != 1) {
    return Unfit(
        "it expects a flat input {features}; put a flatten layer "
        "before it");
  }
  InferredLayer r;
  r.output = {l.out_features()};
  r.params.push_back(CheckedInt(l.out_features()) * in[0]);
  if (!l.no_bias()) r.params.push_back(l.out_features());
  return r;
}

const LayerKind kLinear = {"linear", CheckLinear, nullptr, InferLinear};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kLinear, kLinear);

}  // namespace
}  // namespace cohort
