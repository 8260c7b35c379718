// dropout: nn.Dropout while training, the identity in evaluation; either
// way the shape stays.
#include "absl/status/status.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"

namespace cohort {
namespace {

using spec_internal::Scope;
using spec_internal::UnitInterval;

absl::Status CheckDropout(const LayerSpec& l, const Scope& s) {
  return UnitInterval(s, l.dropout(), "p", l.dropout().p());
}

const LayerKind kDropout = {"dropout", CheckDropout, nullptr,
                            shape_inference::InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kDropout, kDropout);

}  // namespace
}  // namespace cohort
