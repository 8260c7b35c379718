// A layer spec's checks and defaults, through its kind's descriptor
// (common/layer_kind.h): the entry points the spec checker calls for each
// of the model's layers and the branch kind calls for each layer of its
// paths.
//
// Internal to common's spec library and layer kinds. Thread safety: the
// functions keep no state; FillLayerSpecDefaults writes only its argument.
#ifndef COHORT_COMMON_LAYER_SPEC_CHECK_H_
#define COHORT_COMMON_LAYER_SPEC_CHECK_H_

#include "absl/status/status.h"
#include "common/spec_scope.h"
#include "proto/job.pb.h"

namespace cohort {
namespace spec_internal {

// Checks `l`, element `index` of the repeated field `layers` of `parent`
// (a ModelSpec, or a branch's path), whose scope is `outer`: that it names
// a kind, then the kind's own fields.
absl::Status CheckLayerSpec(const LayerSpec& l, const Scope& outer,
                            const Message& parent, int index);

// Fills the defaults of `l`'s kind into a checked layer.
void FillLayerSpecDefaults(LayerSpec* l);

}  // namespace spec_internal
}  // namespace cohort

#endif  // COHORT_COMMON_LAYER_SPEC_CHECK_H_
