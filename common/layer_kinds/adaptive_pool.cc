// adaptive_avgpool2d: nn.AdaptiveAvgPool2d(output), {C, H, W} ->
// {C, output, output}. Any input plane fits: windows overlap or repeat rows
// where the sizes do not divide (worker/layers/adaptive_pool.h).
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Unfit;
using spec_internal::Positive;
using spec_internal::Scope;

absl::Status CheckAdaptivePool(const LayerSpec& l, const Scope& s) {
  const AdaptivePoolSpec& p = l.adaptive_avgpool2d();
  return Positive(s, p, "output", p.output());
}

absl::StatusOr<InferredLayer> InferAdaptivePool(const LayerSpec& l,
                                                const Shape& in) {
  const int64_t k = l.adaptive_avgpool2d().output();
  if (k < 1) return Unfit("the output size must be at least 1");
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  // The GPU kernels index a plane with int32, input and output alike.
  const CheckedInt int32_max(std::numeric_limits<int32_t>::max());
  if (CheckedInt(in[1]) * in[2] > int32_max || CheckedInt(k) * k > int32_max) {
    return Unfit("a plane is too large for int32 indices");
  }
  InferredLayer r;
  r.output = {CheckedInt(in[0]), CheckedInt(k), CheckedInt(k)};
  return r;
}

const LayerKind kAdaptiveAvgPool2d = {"adaptive_avgpool2d", CheckAdaptivePool,
                                      nullptr, InferAdaptivePool};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kAdaptiveAvgpool2D, kAdaptiveAvgPool2d);

}  // namespace
}  // namespace cohort
