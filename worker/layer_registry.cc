#include "worker/layer_registry.h"

#include <map>
#include <type_traits>

#include "common/layer_kind.h"
#include "common/logging.h"

namespace cohort {
namespace {

// Function-local so that registration from any translation unit's static
// initialiser finds it constructed.
std::map<int, CpuLayerMakers>& Registry() {
  static auto* registry = new std::map<int, CpuLayerMakers>();
  return *registry;
}

template <typename T>
CpuLayerMaker<T> MakerFor(const CpuLayerMakers& makers) {
  if constexpr (std::is_same_v<T, float>) {
    return makers.make_float;
  } else {
    return makers.make_double;
  }
}

}  // namespace

bool RegisterCpuLayer(int number, const CpuLayerMakers& makers) {
  CHECK(makers.make_float != nullptr && makers.make_double != nullptr)
      << "CPU layer kind (field " << number << ") lacks a maker";
  CHECK(Registry().emplace(number, makers).second)
      << "CPU layer kind (field " << number << ") is registered twice";
  return true;
}

const CpuLayerMakers* FindCpuLayer(int number) {
  const auto it = Registry().find(number);
  return it == Registry().end() ? nullptr : &it->second;
}

template <typename T>
std::unique_ptr<Layer<T>> MakeLayer(const LayerSpec& l) {
  const CpuLayerMakers* makers = FindCpuLayer(LayerKindNumber(l));
  if (makers == nullptr) return nullptr;
  return MakerFor<T>(*makers)(l);
}

template std::unique_ptr<Layer<float>> MakeLayer<float>(const LayerSpec&);
template std::unique_ptr<Layer<double>> MakeLayer<double>(const LayerSpec&);

}  // namespace cohort
