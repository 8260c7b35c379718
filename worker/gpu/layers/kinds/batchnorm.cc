// The GPU engine's batch norms (LayerSpec.batchnorm1d and batchnorm2d).
#include "worker/gpu/layers/gpu_batchnorm.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeBatchNorm1d(const LayerSpec& l,
                                                          Precision) {
  return std::make_unique<GpuBatchNorm>(l.batchnorm1d(), false);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeBatchNorm2d(const LayerSpec& l,
                                                          Precision) {
  return std::make_unique<GpuBatchNorm>(l.batchnorm2d(), true);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kBatchnorm1D, &MakeBatchNorm1d);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kBatchnorm2D, &MakeBatchNorm2d);

}  // namespace cohort
