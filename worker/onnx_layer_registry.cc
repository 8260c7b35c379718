#include "worker/onnx_layer_registry.h"

#include <map>

#include "common/logging.h"

namespace cohort {
namespace onnx_internal {
namespace {

// Function-local so that registration from any translation unit's static
// initialiser finds it constructed.
std::map<int, OnnxLayerForms>& Registry() {
  static auto* registry = new std::map<int, OnnxLayerForms>();
  return *registry;
}

}  // namespace

bool RegisterOnnxLayer(int number, const OnnxLayerForms& forms) {
  CHECK(forms.channel_major != nullptr || forms.sequence != nullptr)
      << "ONNX layer kind (field " << number << ") has no form";
  CHECK(Registry().emplace(number, forms).second)
      << "ONNX layer kind (field " << number << ") is registered twice";
  return true;
}

const OnnxLayerForms* FindOnnxLayer(int number) {
  const auto it = Registry().find(number);
  return it == Registry().end() ? nullptr : &it->second;
}

}  // namespace onnx_internal
}  // namespace cohort
