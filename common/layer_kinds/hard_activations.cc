// relu6, hardsigmoid and hardswish (nn.ReLU6, nn.Hardsigmoid,
// nn.Hardswish): elementwise, any layout, no parameters.
#include "common/layer_kind.h"
#include "common/shape_inference.h"

namespace cohort {
namespace {

using shape_inference::InferElementwise;

const LayerKind kRelu6 = {"relu6", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kRelu6, kRelu6);
const LayerKind kHardsigmoid = {"hardsigmoid", nullptr, nullptr,
                                InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kHardsigmoid, kHardsigmoid);
const LayerKind kHardswish = {"hardswish", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kHardswish, kHardswish);

}  // namespace
}  // namespace cohort
