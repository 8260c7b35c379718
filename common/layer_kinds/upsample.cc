// upsample: nn.Upsample(scale_factor=scale, mode=nearest|bilinear) with
// align_corners=False, {C, H, W} -> {C, H * scale, W * scale}. No
// parameters.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"

namespace cohort {
namespace {

using shape_inference::Unfit;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckUpsample(const LayerSpec& l, const Scope& s) {
  const UpsampleSpec& u = l.upsample();
  return Require(u.scale() >= 1, s, u, "scale", ">= 1", u.scale());
}

absl::StatusOr<InferredLayer> InferUpsample(const LayerSpec& l,
                                            const Shape& in) {
  const int64_t k = l.upsample().scale();
  if (k < 1) return Unfit(absl::StrCat("scale must be >= 1, got ", k));
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  InferredLayer r;
  r.output = {CheckedInt(in[0]), CheckedInt(in[1]) * k, CheckedInt(in[2]) * k};
  return r;
}

const LayerKind kUpsample = {"upsample", CheckUpsample, nullptr, InferUpsample};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kUpsample, kUpsample);

}  // namespace
}  // namespace cohort
