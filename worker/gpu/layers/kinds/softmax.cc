// The GPU engine's softmax over the features (LayerSpec.softmax).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_softmax.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeSoftmax(const LayerSpec&,
                                                      Precision) {
  return std::make_unique<GpuSoftmax>();
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kSoftmax, &MakeSoftmax);

}  // namespace cohort
