// The CPU engine's windowed pools (LayerSpec.maxpool2d, avgpool2d,
// maxpool1d and avgpool1d).
#include "worker/layers/pool.h"

#include "worker/layer_registry.h"
#include "worker/layers/pool1d.h"

namespace cohort {
namespace {

// An unset stride is the kernel, as PyTorch's.
PoolOptions Options(const PoolSpec& p) {
  return PoolOptions{p.kernel(), p.stride() > 0 ? p.stride() : p.kernel(),
                     p.padding()};
}

template <typename T>
std::unique_ptr<Layer<T>> MakePool2d(const LayerSpec& l) {
  const PoolSpec& p = l.has_maxpool2d() ? l.maxpool2d() : l.avgpool2d();
  if (l.has_maxpool2d()) return std::make_unique<MaxPool2d<T>>(Options(p));
  return std::make_unique<AvgPool2d<T>>(Options(p));
}

template <typename T>
std::unique_ptr<Layer<T>> MakePool1d(const LayerSpec& l) {
  const PoolSpec& p = l.has_maxpool1d() ? l.maxpool1d() : l.avgpool1d();
  return std::make_unique<Pool1d<T>>(l.has_maxpool1d(), Options(p));
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kMaxpool2D, MakePool2d);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kAvgpool2D, MakePool2d);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kMaxpool1D, MakePool1d);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kAvgpool1D, MakePool1d);

}  // namespace cohort
