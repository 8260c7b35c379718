// The GPU engine's PReLU (LayerSpec.prelu); the starting slopes come from
// the CPU model, as every parameter does.
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_prelu.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakePrelu(const LayerSpec& l,
                                                    Precision) {
  const int64_t n = l.prelu().num_parameters();
  return std::make_unique<GpuPrelu>(n > 0 ? n : 1);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kPrelu, &MakePrelu);

}  // namespace cohort
