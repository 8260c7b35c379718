// interaction: DLRM's feature interaction over a flat {dim (1 + T)} sample
// of 1 + T vectors: DOT -> {dim + (T + 1) T / 2} (the first vector, then
// the dot product of every pair of distinct vectors), CAT -> the input as
// it is. No parameters.
#include <cstdint>

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

absl::Status CheckInteraction(const LayerSpec& l, const Scope& s) {
  const InteractionSpec& i = l.interaction();
  return Positive(s, i, "dim", i.dim());
}

absl::StatusOr<InferredLayer> InferInteraction(const LayerSpec& l,
                                               const Shape& in) {
  const InteractionSpec& i = l.interaction();
  if (i.dim() <= 0) {
    return Unfit(absl::StrCat("dim must be positive, got ", i.dim()));
  }
  if (in.size() != 1 || in[0] % i.dim() != 0) {
    return Unfit(absl::StrCat("it reads a flat input of 1 + T vectors of dim ",
                              i.dim(), " features: [dim (1 + T)]"));
  }
  const int64_t vectors = in[0] / i.dim();
  InferredLayer r;
  if (i.kind() == InteractionSpec::CAT) {
    r.output = {CheckedInt(in[0])};
  } else {
    // (T + 1) T / 2 pairs, halving the even factor first.
    const CheckedInt pairs = vectors % 2 == 0
                                 ? CheckedInt(vectors / 2) * (vectors - 1)
                                 : CheckedInt(vectors) * ((vectors - 1) / 2);
    r.output = {pairs + i.dim()};
  }
  return r;
}

const LayerKind kInteraction = {"interaction", CheckInteraction, nullptr,
                                InferInteraction};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kInteraction, kInteraction);

}  // namespace
}  // namespace cohort
