// softmax: nn.Softmax(dim=1) over the features, {F}, {C, L} or {C, H, W}:
// across the channels at each position. Keeps its input's shape, holds no
// parameters.
#include "common/layer_kind.h"
#include "common/shape_inference.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Unfit;

absl::StatusOr<InferredLayer> InferSoftmax(const LayerSpec&, const Shape& in) {
  if (in.empty() || in.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  InferredLayer r;
  r.output = Checked(in);
  return r;
}

const LayerKind kSoftmax = {"softmax", nullptr, nullptr, InferSoftmax};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kSoftmax, kSoftmax);

}  // namespace
}  // namespace cohort
