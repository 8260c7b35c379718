// The CPU engine's batch norms (LayerSpec.batchnorm1d and batchnorm2d).
#include "worker/layers/batchnorm.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeBatchNorm(const LayerSpec& l) {
  const BatchNormSpec& s =
      l.has_batchnorm1d() ? l.batchnorm1d() : l.batchnorm2d();
  BatchNormOptions o;
  if (s.eps() > 0) o.eps = s.eps();
  if (s.momentum() > 0) o.momentum = s.momentum();
  if (l.has_batchnorm1d()) return std::make_unique<BatchNorm1d<T>>(o);
  return std::make_unique<BatchNorm2d<T>>(o);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kBatchnorm1D, MakeBatchNorm);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kBatchnorm2D, MakeBatchNorm);

}  // namespace cohort
