// global_avgpool: nn.AdaptiveAvgPool2d(1) then flatten, {C, H, W} -> {C}
// (and {C, L} -> {C}).
#include "common/layer_kind.h"
#include "common/shape_inference.h"

namespace cohort {
namespace {

using shape_inference::Unfit;

absl::StatusOr<InferredLayer> InferGlobalAvgPool(const LayerSpec& l,
                                                 const Shape& in) {
  if (in.size() != 2 && in.size() != 3) {
    return Unfit("it expects a per-sample input [C, H, W] or [C, L]");
  }
  InferredLayer r;
  r.output = {in[0]};
  return r;
}

const LayerKind kGlobalAvgPool = {"global_avgpool", nullptr, nullptr,
                                  InferGlobalAvgPool};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kGlobalAvgpool, kGlobalAvgPool);

}  // namespace
}  // namespace cohort
