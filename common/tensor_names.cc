#include "common/tensor_names.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

using Module = TensorNames::Module;

void AddNamed(const google::protobuf::RepeatedPtrField<LayerSpec>& layers,
              const std::string& prefix,
              std::map<std::string, Module, std::less<>>* out) {
  for (int i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const std::string at = absl::StrCat(prefix, i);
    if (!l.name().empty() || !l.tensor_names().empty()) {
      Module& m = (*out)[at];
      m.name = l.name();
      m.tensors.insert(l.tensor_names().begin(), l.tensor_names().end());
    }
    for (int p = 0; p < l.branch().paths_size(); ++p) {
      AddNamed(l.branch().paths(p).layers(),
               absl::StrCat(at, ".paths.", p, "."), out);
    }
  }
}

std::string FindDuplicate(
    const google::protobuf::RepeatedPtrField<LayerSpec>& layers,
    std::set<std::string>* seen) {
  for (const LayerSpec& l : layers) {
    if (!l.name().empty() && !seen->insert(l.name()).second) return l.name();
    for (const BranchSpec::Path& p : l.branch().paths()) {
      std::string twice = FindDuplicate(p.layers(), seen);
      if (!twice.empty()) return twice;
    }
  }
  return "";
}

}  // namespace

std::string DuplicateLayerName(
    const google::protobuf::RepeatedPtrField<LayerSpec>& layers) {
  std::set<std::string> seen;
  return FindDuplicate(layers, &seen);
}

TensorNames::TensorNames(const std::vector<LayerSpec>& layers) {
  google::protobuf::RepeatedPtrField<LayerSpec> list(layers.begin(),
                                                     layers.end());
  AddNamed(list, "", &modules_);
}

std::string TensorNames::Of(absl::string_view position_name) const {
  if (modules_.empty()) return std::string(position_name);
  // The longest prefix that ends at a dot and names a layer.
  for (size_t dot = position_name.rfind('.'); dot != absl::string_view::npos;
       dot = dot == 0 ? absl::string_view::npos
                      : position_name.rfind('.', dot - 1)) {
    auto it = modules_.find(position_name.substr(0, dot));
    if (it == modules_.end()) continue;
    auto own = it->second.tensors.find(position_name.substr(dot + 1));
    if (own != it->second.tensors.end()) return own->second;
    if (!it->second.name.empty()) {
      return absl::StrCat(it->second.name, position_name.substr(dot));
    }
  }
  return std::string(position_name);
}

absl::Status CheckLayerName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("must not be empty when given");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' &&
        c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          "may hold letters, digits, '_' and '.' only, got \"", name, "\""));
    }
  }
  if (name.front() == '.' || name.back() == '.' ||
      name.find("..") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "must be dot-separated names without empty parts (as a PyTorch "
        "module path), got \"",
        name, "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckTensorNames(const LayerSpec& layer) {
  for (const auto& [tensor, name] : layer.tensor_names()) {
    absl::Status ok = CheckLayerName(tensor);
    if (ok.ok()) ok = CheckLayerName(name);
    if (!ok.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry \"", tensor, "\": ", ok.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
