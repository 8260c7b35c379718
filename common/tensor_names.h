// The names a model's parameters and buffers are saved under. Inside the
// engine a tensor is named by its layer's position, as PyTorch names an
// nn.Sequential of the same layers ("4.paths.0.1.weight"); a layer with a
// `name` (LayerSpec.name, kept from an imported graph) lends it to its
// tensors instead ("layer1.0.bn1.weight"), in checkpoints, safetensors and
// ONNX files and in --init-from, so weights move to and from the user's own
// PyTorch module with no renaming.
//
// Thread safety: plain functions; a TensorNames is immutable once built.
#ifndef COHORT_COMMON_TENSOR_NAMES_H_
#define COHORT_COMMON_TENSOR_NAMES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace cohort {

class TensorNames {
 public:
  TensorNames() = default;
  // The named layers of `layers`, those inside branch paths included.
  explicit TensorNames(const std::vector<LayerSpec>& layers);

  // `position_name` ("4.paths.0.1.weight") under the name its layer gives
  // that tensor (LayerSpec.tensor_names), else under the name of the
  // innermost named layer that holds it ("layer1.0.bn1.weight"); itself
  // when no layer around it is named.
  std::string Of(absl::string_view position_name) const;
  bool empty() const { return modules_.empty(); }

  struct Module {
    std::string name;  // "layer1.0.bn1", or "" for tensor names only
    // Tensor name in the layer ("in_proj_weight") -> its own name.
    std::map<std::string, std::string, std::less<>> tensors;
  };

 private:
  // Layer position ("4.paths.0.1") -> its names.
  std::map<std::string, Module, std::less<>> modules_;
};

// Whether `name` can be a layer's name: letters, digits, '_' and '.', not
// empty, no empty component. InvalidArgument saying why otherwise.
absl::Status CheckLayerName(absl::string_view name);

// Whether the tensor names of `layer` (LayerSpec.tensor_names) are
// well formed: known tensor names are not checked here, only that each key
// and value is a possible name. InvalidArgument naming the entry.
absl::Status CheckTensorNames(const LayerSpec& layer);

// The first name that two layers of `layers` (branch paths included)
// share, or "" when every name is unique.
std::string DuplicateLayerName(
    const google::protobuf::RepeatedPtrField<LayerSpec>& layers);

}  // namespace cohort

#endif  // COHORT_COMMON_TENSOR_NAMES_H_
