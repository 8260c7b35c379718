// The GPU engine's pools (LayerSpec.maxpool2d, avgpool2d, global_avgpool,
// maxpool1d and avgpool1d).
#include "worker/gpu/layers/gpu_layer_registry.h"
#include "worker/gpu/layers/gpu_pool.h"
#include "worker/gpu/layers/gpu_pool1d.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakePool2d(const LayerSpec& l,
                                                     Precision) {
  const PoolSpec& p = l.has_maxpool2d() ? l.maxpool2d() : l.avgpool2d();
  return std::make_unique<GpuPool>(
      l.has_maxpool2d() ? GpuPool::Kind::kMax : GpuPool::Kind::kAvg, p.kernel(),
      p.stride() > 0 ? p.stride() : p.kernel(), p.padding());
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGlobalAvgPool(const LayerSpec&,
                                                            Precision) {
  return std::make_unique<GpuPool>(GpuPool::Kind::kGlobalAvg, 0, 0, 0);
}

absl::StatusOr<std::unique_ptr<GpuLayer>> MakePool1d(const LayerSpec& l,
                                                     Precision) {
  const PoolSpec& p = l.has_maxpool1d() ? l.maxpool1d() : l.avgpool1d();
  return std::make_unique<GpuPool1d>(l.has_maxpool1d(), p.kernel(), p.stride(),
                                     p.padding());
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kMaxpool2D, &MakePool2d);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kAvgpool2D, &MakePool2d);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kGlobalAvgpool, &MakeGlobalAvgPool);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kMaxpool1D, &MakePool1d);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kAvgpool1D, &MakePool1d);

}  // namespace cohort
