// A trained model as an ONNX graph (opset 17), in inference form: BatchNorm
// with its running statistics, dropout removed, residual blocks as
// Conv/BatchNormalization/Relu with an Add, a named input ("input",
// [batch, *sample shape]) and output ("output"), and a symbolic batch
// dimension. Written with the ONNX protobuf messages of Debian's
// libonnx-dev, not by hand.
//
// The input is what the model was trained on: the data set's samples after
// its normalisation (the model's metadata says which); nothing is folded in.
// A language model (first layer `embedding`) takes the TOKENS data set's
// samples: token ids as floats, [batch, 1, L] (exact below 2^24), cast to
// int64 inside the graph; its output is the logits [batch, vocab, L].
//
// The transformer layers: LayerNormalization (both LayerNorm kinds),
// Gather for the embedding, an Add of the positional table, attention as
// Gemm (the fused QKV projection) / MatMul / Mul(scale) / Add(a constant
// causal mask of -inf above the diagonal) / Softmax / MatMul with
// Reshape and Transpose for the heads, the tied head as a MatMul with the
// embedding's initializer (shared, not duplicated).
//
// Thread safety: plain functions over data the caller owns.
#ifndef COHORT_WORKER_ONNX_EXPORT_H_
#define COHORT_WORKER_ONNX_EXPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "proto/job.pb.h"
#include "worker/trained_model.h"

namespace cohort {

inline constexpr int kOnnxOpset = 17;

// A float tensor the caller keeps alive while the graph is built.
struct OnnxTensorRef {
  const float* data;
  Shape shape;
  // The initializer's name, when not the key it is found by.
  std::string name;
};

// Everything the graph needs, with or without an engine model: the layer
// list, the per-sample input shape, the tensors by PyTorch name ("0.weight",
// "3.attn.in_proj_weight", BatchNorm's "1.running_mean") and, optionally,
// each layer's per-sample output shape (empty: inferred from the specs).
struct OnnxSource {
  std::string name = "cohort";
  std::string spec_text;  // recorded as metadata
  int64_t step = 0;
  std::vector<LayerSpec> layers;
  Shape input_shape;
  std::vector<Shape> layer_outputs;
  std::map<std::string, OnnxTensorRef> tensors;
};

// The serialized ModelProto. Unimplemented naming the layer for a kind
// without an ONNX form (none today); InternalError naming a tensor the
// graph needs and `source` lacks.
absl::StatusOr<std::string> OnnxModelBytes(const OnnxSource& source);
absl::StatusOr<std::string> OnnxModelBytes(TrainedModel& trained);

// Each layer's per-sample output shape: common/model_sizes.h's inference,
// and the exporter's own for the transformer layers.
absl::StatusOr<std::vector<Shape>> OnnxLayerOutputs(
    const std::vector<LayerSpec>& layers, const Shape& input_shape);

}  // namespace cohort

#endif  // COHORT_WORKER_ONNX_EXPORT_H_
