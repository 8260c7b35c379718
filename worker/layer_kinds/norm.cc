// The CPU engine's layer and group norms (LayerSpec.layernorm and
// groupnorm).
#include "worker/layers/norm.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeLayerNorm(const LayerSpec& l) {
  const LayerNormSpec& s = l.layernorm();
  NormOptions o;
  if (s.eps() > 0) o.eps = s.eps();
  o.affine = !s.no_affine();
  o.per_position = s.per_position();
  return std::make_unique<LayerNorm<T>>(o);
}

template <typename T>
std::unique_ptr<Layer<T>> MakeGroupNorm(const LayerSpec& l) {
  const GroupNormSpec& s = l.groupnorm();
  NormOptions o;
  if (s.eps() > 0) o.eps = s.eps();
  o.affine = !s.no_affine();
  o.groups = s.groups();
  return std::make_unique<GroupNorm<T>>(o);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kLayernorm, MakeLayerNorm);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kGroupnorm, MakeGroupNorm);

}  // namespace cohort
