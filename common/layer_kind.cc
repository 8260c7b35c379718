#include "common/layer_kind.h"

#include <map>

#include "common/logging.h"

namespace cohort {
namespace {

// Function-local so that registration from any translation unit's static
// initialiser finds it constructed.
std::map<int, LayerKind>& Registry() {
  static auto* registry = new std::map<int, LayerKind>();
  return *registry;
}

}  // namespace

int LayerKindNumber(const LayerSpec& l) {
  return static_cast<int>(l.kind_case());
}

const LayerKind* FindLayerKind(int number) {
  const auto it = Registry().find(number);
  return it == Registry().end() ? nullptr : &it->second;
}

const LayerKind* FindLayerKind(const LayerSpec& l) {
  return FindLayerKind(LayerKindNumber(l));
}

bool RegisterLayerKind(int number, const LayerKind& kind) {
  CHECK(kind.infer != nullptr) << "layer kind " << kind.name << " has no infer";
  CHECK(Registry().emplace(number, kind).second)
      << "layer kind " << kind.name << " (field " << number
      << ") is registered twice";
  return true;
}

std::vector<int> RegisteredLayerKinds() {
  std::vector<int> numbers;
  for (const auto& [number, kind] : Registry()) numbers.push_back(number);
  return numbers;
}

}  // namespace cohort
