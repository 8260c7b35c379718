// ONNX import (`cohort import`, `model { onnx }`): a graph exported by
// torch.onnx.export becomes cohort layers (a ModelSpec), each named after
// the module its parameters came from (LayerSpec.name, "layer1.0.conv1"),
// and its initializers become safetensors tensors under those names, the
// state_dict's keys ("layer1.0.conv1.weight"; "3.weight" for a layer
// without one), so `--init-from` starts from PyTorch's weights and the
// weights cohort saves load back into the user's module.
//
// The graph must be series-parallel over one input: a chain of layers
// where a tensor may fork into paths that meet again at one Add (a SUM
// branch) or one Concat along the channels (a CONCAT branch). Constants and
// torch's shape arithmetic are folded; BatchNorm and Dropout may come from
// a training-mode export. A graph whose input is int64 token ids [N, L] is
// a token model: its [N, L, D] activations are cohort's {D, L} sequences,
// self-attention blocks are recognised by evaluating them
// (onnx_import_attention.cc), and pre-norm blocks become transformer_block
// layers. Anything else is refused with one line naming the node, its
// operator and the nearest form cohort takes.
//
// Plain functions over values the caller owns; thread-safe.
#ifndef COHORT_COMMON_ONNX_ONNX_IMPORT_H_
#define COHORT_COMMON_ONNX_ONNX_IMPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "onnx/onnx_pb.h"
#include "proto/job.pb.h"

namespace cohort {

struct OnnxImportOptions {
  // The per-sample input shape ({C, H, W}, {C, L} or {F}), replacing the
  // graph's own (needed when the graph's dims are symbolic). Empty: the
  // graph's.
  std::vector<int64_t> input_shape;
};

struct ImportedModel {
  ModelSpec model;
  std::vector<int64_t> input_shape;   // per sample
  std::vector<int64_t> output_shape;  // per sample
  // The parameters and BatchNorm statistics under the names the layers
  // lend them (common/tensor_names.h), in the order of the layers.
  std::vector<SafeTensor> weights;
  std::string producer;  // "pytorch 1.13.1", or "" when the file has none
  int64_t opset = 0;     // of the default ONNX domain
};

// Maps `model`'s graph onto cohort layers. InvalidArgument, one line, for
// a graph cohort cannot express or a malformed one (unknown inputs,
// cycles, missing or mis-shaped initializers).
absl::StatusOr<ImportedModel> ImportOnnx(const onnx::ModelProto& model,
                                         const OnnxImportOptions& options);

// The same from a serialised ModelProto; DataLoss when `bytes` is not one.
absl::StatusOr<ImportedModel> ImportOnnxBytes(const std::string& bytes,
                                              const OnnxImportOptions& options);

// A whole job spec (text format) that runs as written: a header comment
// naming `source`, the imported model, and a SYNTHETIC data set of the
// model's input shape as a placeholder for the user's data.
std::string ImportedJobText(const ImportedModel& imported,
                            const std::string& source,
                            const std::string& weights_path);

}  // namespace cohort

#endif  // COHORT_COMMON_ONNX_ONNX_IMPORT_H_
