#include "worker/init_weights.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/torchvision_names.h"

namespace cohort {
namespace {

// `name`'s values from the file, which must have `shape`.
// `name`'s values from the file, or else its torchvision name's (`alias`,
// "" for none); the tensor must have `shape`.
absl::StatusOr<std::vector<float>> Take(
    const SafetensorsFile& file, const std::string& path, std::string name,
    const std::string& alias, const Shape& shape, std::set<std::string>* used) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end() && !alias.empty()) {
    it = file.tensors.find(alias);
    name = alias;
  }
  if (it == file.tensors.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no tensor ", name, " (the model's ", ShapeString(shape),
        "); its names are PyTorch's state_dict names of an nn.Sequential of "
        "the spec's layers",
        alias.empty() ? "" : ", or torchvision's ResNet names"));
  }
  if (it->second.shape != std::vector<int64_t>(shape.begin(), shape.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor ", name, " has shape [",
                     absl::StrJoin(it->second.shape, ", "),
                     "] where the model's is ", ShapeString(shape)));
  }
  used->insert(name);
  absl::StatusOr<std::vector<float>> v = SafeTensorFloats(it->second);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", v.status().message()));
  }
  return v;
}

CheckpointTensor* Find(std::vector<CheckpointTensor>* state,
                       const std::string& name) {
  for (CheckpointTensor& t : *state) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

absl::Status ApplyWeights(const SafetensorsFile& file, const std::string& path,
                          const Model<float>& model,
                          const std::map<std::string, std::string>& aliases,
                          std::vector<CheckpointTensor>* state) {
  std::set<std::string> used;
  CheckpointTensor* params = Find(state, "params");
  if (params == nullptr) return absl::InternalError("no params in the state");
  for (const auto& e : model.param_store().entries()) {
    ASSIGN_OR_RETURN(const std::vector<float> v,
                     Take(file, path, e.name, TorchvisionName(aliases, e.name),
                          e.shape, &used));
    std::copy(v.begin(), v.end(), params->values.begin() + e.offset);
  }
  const std::vector<std::string> names = model.BufferNames();
  std::vector<Tensor*> buffers = const_cast<Model<float>&>(model).Buffers();
  for (size_t i = 0; i < names.size(); ++i) {
    CheckpointTensor* b = Find(state, absl::StrCat("buffer.", i));
    if (b == nullptr) return absl::InternalError("a buffer is missing");
    ASSIGN_OR_RETURN(
        const std::vector<float> v,
        Take(file, path, names[i], TorchvisionName(aliases, names[i]),
             buffers[i]->shape(), &used));
    b->values = v;
  }
  for (const auto& [name, t] : file.tensors) {
    if (used.count(name) == 0 && !absl::EndsWith(name, "num_batches_tracked")) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", name, " is not in the model (", used.size(),
          " of its tensors matched): is it another model's file?"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
