// slice: x[:, begin:end] of a flat sample, {F} -> {end - begin}, to split a
// sample whose columns mean different things between a branch's paths.
// No parameters.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Require;
using spec_internal::Scope;

// Whether `end` fits the input is the shape inference's to say.
absl::Status CheckSlice(const LayerSpec& l, const Scope& s) {
  const SliceSpec& c = l.slice();
  RETURN_IF_ERROR(NonNegative(s, c, "begin", c.begin()));
  return Require(c.end() > c.begin(), s, c, "end",
                 absl::StrCat("> begin (", c.begin(), ")"), c.end());
}

absl::StatusOr<InferredLayer> InferSlice(const LayerSpec& l, const Shape& in) {
  const SliceSpec& c = l.slice();
  if (in.size() != 1) {
    return Unfit(
        "it takes features of a flat input [F]; put a flatten layer before "
        "it");
  }
  if (c.begin() < 0 || c.end() <= c.begin() || c.end() > in[0]) {
    return Unfit(absl::StrCat("features [", c.begin(), ", ", c.end(),
                              ") are not a non-empty range of the input's ",
                              in[0], " (0 <= begin < end <= ", in[0], ")"));
  }
  InferredLayer r;
  r.output = {CheckedInt(c.end() - c.begin())};
  return r;
}

const LayerKind kSlice = {"slice", CheckSlice, nullptr, InferSlice};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kSlice, kSlice);

}  // namespace
}  // namespace cohort
