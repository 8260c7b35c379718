// The GPU engine's dropout (LayerSpec.dropout).
#include "worker/gpu/layers/gpu_dropout.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeDropout(const LayerSpec& l,
                                                      Precision) {
  return std::make_unique<GpuDropout>(l.dropout().p());
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kDropout, &MakeDropout);

}  // namespace cohort
