// The GPU engine's activations (LayerSpec.relu on cuDNN; gelu, silu, tanh,
// sigmoid and leaky_relu on cohort's own kernels).
#include "common/model_sizes.h"
#include "worker/gpu/layers/gpu_activation.h"
#include "worker/gpu/layers/gpu_elementwise_activation.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeRelu(const LayerSpec&,
                                                   Precision) {
  return std::make_unique<GpuRelu>();
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGelu(const LayerSpec& l,
                                                   Precision) {
  return std::make_unique<GpuElementwiseActivation>(
      l.gelu().tanh_approximation() ? ActivationKind::kGeluTanh
                                    : ActivationKind::kGelu);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeSilu(const LayerSpec&,
                                                   Precision) {
  return std::make_unique<GpuElementwiseActivation>(ActivationKind::kSilu);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeTanh(const LayerSpec&,
                                                   Precision) {
  return std::make_unique<GpuElementwiseActivation>(ActivationKind::kTanh);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeSigmoid(const LayerSpec&,
                                                      Precision) {
  return std::make_unique<GpuElementwiseActivation>(ActivationKind::kSigmoid);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeLeakyRelu(const LayerSpec& l,
                                                        Precision) {
  return std::make_unique<GpuElementwiseActivation>(
      ActivationKind::kLeakyRelu, LeakyReluSlope(l.leaky_relu()));
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kRelu, &MakeRelu);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kGelu, &MakeGelu);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kSilu, &MakeSilu);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kTanh, &MakeTanh);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kSigmoid, &MakeSigmoid);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kLeakyRelu, &MakeLeakyRelu);

}  // namespace cohort
