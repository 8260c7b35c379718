// to_sequence: a spatial activation {C, H, W} as the sequence {C, H * W}
// that the transformer layers take (a vision transformer's patches after
// its patch convolution). No parameters.
#include "common/layer_kind.h"
#include "common/shape_inference.h"

namespace cohort {
namespace {

using shape_inference::Unfit;

absl::StatusOr<InferredLayer> InferToSequence(const LayerSpec& l,
                                              const Shape& in) {
  if (in.size() == 2) {
    return Unfit(
        "its input [C, L] is a sequence already; to_sequence takes a "
        "per-sample input [C, H, W]");
  }
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  InferredLayer r;
  r.output = {CheckedInt(in[0]), CheckedInt(in[1]) * in[2]};
  return r;
}

const LayerKind kToSequence = {"to_sequence", nullptr, nullptr,
                               InferToSequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kToSequence, kToSequence);

}  // namespace
}  // namespace cohort
