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

// The values of the first of `names` the file holds (the name the model
// saves the tensor under, its position name, its torchvision name; an
// empty one is skipped); the tensor must have `shape`.
absl::StatusOr<std::vector<float>> Take(const SafetensorsFile& file,
                                        const std::string& path,
                                        const std::vector<std::string>& names,
                                        const Shape& shape,
                                        std::set<std::string>* used) {
  auto it = file.tensors.end();
  std::string name = names.front();
  for (const std::string& n : names) {
    if (n.empty() || (it = file.tensors.find(n)) == file.tensors.end()) {
      continue;
    }
    name = n;
    break;
  }
  if (it == file.tensors.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no tensor ", absl::StrJoin(names, " or "), " (the model's ",
        ShapeString(shape),
        "); its names are PyTorch's state_dict names: the layers' own names "
        "where the spec gives them, else an nn.Sequential of the spec's "
        "layers"));
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

// Every name the tensor at `position_name` may have in a file, as Take
// wants them.
std::vector<std::string> Candidates(
    const Model<float>& model,
    const std::map<std::string, std::string>& aliases,
    const std::string& position_name) {
  std::vector<std::string> out = {model.TensorName(position_name)};
  if (out[0] != position_name) out.push_back(position_name);
  const std::string torchvision = TorchvisionName(aliases, position_name);
  if (!torchvision.empty()) out.push_back(torchvision);
  return out;
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
    ASSIGN_OR_RETURN(
        const std::vector<float> v,
        Take(file, path, Candidates(model, aliases, e.name), e.shape, &used));
    std::copy(v.begin(), v.end(), params->values.begin() + e.offset);
  }
  const std::vector<std::string> names = model.BufferNames();
  std::vector<Tensor*> buffers = const_cast<Model<float>&>(model).Buffers();
  for (size_t i = 0; i < names.size(); ++i) {
    CheckpointTensor* b = Find(state, absl::StrCat("buffer.", i));
    if (b == nullptr) return absl::InternalError("a buffer is missing");
    ASSIGN_OR_RETURN(const std::vector<float> v,
                     Take(file, path, Candidates(model, aliases, names[i]),
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
