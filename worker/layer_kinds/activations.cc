// The CPU engine's activations (LayerSpec.relu, gelu, silu, tanh, sigmoid
// and leaky_relu).
#include "common/model_sizes.h"
#include "worker/layer_registry.h"
#include "worker/layers/activation.h"
#include "worker/layers/elementwise_activation.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeRelu(const LayerSpec&) {
  return std::make_unique<ReLU<T>>();
}

template <typename T>
std::unique_ptr<Layer<T>> MakeGelu(const LayerSpec& l) {
  return std::make_unique<ElementwiseActivation<T>>(
      l.gelu().tanh_approximation() ? ActivationKind::kGeluTanh
                                    : ActivationKind::kGelu);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeSilu(const LayerSpec&) {
  return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kSilu);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeTanh(const LayerSpec&) {
  return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kTanh);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeSigmoid(const LayerSpec&) {
  return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kSigmoid);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeLeakyRelu(const LayerSpec& l) {
  return std::make_unique<ElementwiseActivation<T>>(
      ActivationKind::kLeakyRelu, LeakyReluSlope(l.leaky_relu()));
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kRelu, MakeRelu);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kGelu, MakeGelu);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kSilu, MakeSilu);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kTanh, MakeTanh);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kSigmoid, MakeSigmoid);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kLeakyRelu, MakeLeakyRelu);

}  // namespace cohort
