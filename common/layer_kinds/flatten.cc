// flatten: nn.Flatten, any sample shape -> {features}.
#include "common/layer_kind.h"
#include "common/shape_inference.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Elements;
using shape_inference::Unfit;

absl::StatusOr<InferredLayer> InferFlatten(const LayerSpec& l,
                                           const Shape& in) {
  if (in.empty() || in.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  InferredLayer r;
  r.output = {Elements(Checked(in))};
  return r;
}

const LayerKind kFlatten = {"flatten", nullptr, nullptr, InferFlatten};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kFlatten, kFlatten);

}  // namespace
}  // namespace cohort
