#include "worker/torchvision_names.h"

#include "absl/strings/str_cat.h"

namespace cohort {

std::map<std::string, std::string> TorchvisionLayerNames(
    const std::vector<LayerSpec>& layers) {
  std::map<std::string, std::string> names;
  if (layers.size() < 3 || !layers[0].has_conv2d() ||
      !layers[1].has_batchnorm2d()) {
    return {};
  }
  names["0"] = "conv1";
  names["1"] = "bn1";
  int stage = 0, block = 0;
  int64_t channels = -1;
  for (size_t i = 2; i < layers.size(); ++i) {
    if (!layers[i].has_residual()) continue;
    const int64_t out = layers[i].residual().out_channels();
    if (out != channels) {
      ++stage;
      block = 0;
      channels = out;
    }
    names[absl::StrCat(i)] = absl::StrCat("layer", stage, ".", block++);
  }
  if (stage == 0) return {};  // not a ResNet
  if (layers.back().has_linear()) {
    names[absl::StrCat(layers.size() - 1)] = "fc";
  }
  return names;
}

std::string TorchvisionName(const std::map<std::string, std::string>& layers,
                            const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return "";
  auto it = layers.find(name.substr(0, dot));
  if (it == layers.end()) return "";
  return absl::StrCat(it->second, name.substr(dot));
}

}  // namespace cohort
