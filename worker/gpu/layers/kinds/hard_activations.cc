// The GPU engine's relu6, hardsigmoid and hardswish, on cohort's
// elementwise activation kernels (kernels/cuda/layer_ops.h).
#include "worker/gpu/layers/gpu_elementwise_activation.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeRelu6(const LayerSpec&,
                                                    Precision) {
  return std::make_unique<GpuElementwiseActivation>(ActivationKind::kRelu6);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeHardsigmoid(const LayerSpec&,
                                                          Precision) {
  return std::make_unique<GpuElementwiseActivation>(
      ActivationKind::kHardsigmoid);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeHardswish(const LayerSpec&,
                                                        Precision) {
  return std::make_unique<GpuElementwiseActivation>(ActivationKind::kHardswish);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kRelu6, &MakeRelu6);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kHardsigmoid, &MakeHardsigmoid);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kHardswish, &MakeHardswish);

}  // namespace cohort
