// sequence_pool: a sequence {D, L} pooled over its positions to {D} (mode
// MEAN: x.mean(dim=1) on PyTorch's [N, L, D]). No parameters; the spec's
// enum check (common/spec.cc) refuses a mode that is not one.
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::CheckSequence;
using shape_inference::Unfit;

absl::StatusOr<InferredLayer> InferSequencePool(const LayerSpec& l,
                                                const Shape& in) {
  if (in.size() == 3) {
    return Unfit(
        "it pools a sequence [D, L]; a per-sample input [C, H, W] needs a "
        "to_sequence layer before it (or global_avgpool instead)");
  }
  RETURN_IF_ERROR(CheckSequence(in));
  InferredLayer r;
  r.output = {CheckedInt(in[0])};
  return r;
}

const LayerKind kSequencePool = {"sequence_pool", nullptr, nullptr,
                                 InferSequencePool};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kSequencePool, kSequencePool);

}  // namespace
}  // namespace cohort
