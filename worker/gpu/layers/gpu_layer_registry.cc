#include "worker/gpu/layers/gpu_layer_registry.h"

#include <map>

#include "common/logging.h"

namespace cohort {
namespace {

// Function-local so that registration from any translation unit's static
// initialiser finds it constructed.
std::map<int, GpuLayerMaker>& Registry() {
  static auto* registry = new std::map<int, GpuLayerMaker>();
  return *registry;
}

}  // namespace

bool RegisterGpuLayer(int number, GpuLayerMaker maker) {
  CHECK(maker != nullptr) << "GPU layer kind (field " << number
                          << ") has no maker";
  CHECK(Registry().emplace(number, maker).second)
      << "GPU layer kind (field " << number << ") is registered twice";
  return true;
}

GpuLayerMaker FindGpuLayer(int number) {
  const auto it = Registry().find(number);
  return it == Registry().end() ? nullptr : it->second;
}

}  // namespace cohort
