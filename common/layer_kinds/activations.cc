// The elementwise activations: relu, gelu, silu, tanh, sigmoid and
// leaky_relu (nn.ReLU ... nn.LeakyReLU). They keep any layout's shape and
// hold no parameters.
#include "common/layer_kind.h"
#include "common/shape_inference.h"

namespace cohort {
namespace {

using shape_inference::InferElementwise;

// PyTorch's default slope, written into the spec so that it shows.
void FillLeakyRelu(LayerSpec* l) {
  if (!l->leaky_relu().has_negative_slope()) {
    l->mutable_leaky_relu()->set_negative_slope(0.01f);
  }
}

const LayerKind kRelu = {"relu", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kRelu, kRelu);
const LayerKind kGelu = {"gelu", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kGelu, kGelu);
const LayerKind kSilu = {"silu", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kSilu, kSilu);
const LayerKind kTanh = {"tanh", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kTanh, kTanh);
const LayerKind kSigmoid = {"sigmoid", nullptr, nullptr, InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kSigmoid, kSigmoid);
const LayerKind kLeakyRelu = {"leaky_relu", nullptr, FillLeakyRelu,
                              InferElementwise};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kLeakyRelu, kLeakyRelu);

}  // namespace
}  // namespace cohort
