// The ONNX graph builder behind worker/onnx_export.h, shared by the
// exporter's files (onnx_export.cc: the graph around the layers;
// onnx_kinds/: one file per layer kind or family, registered in
// onnx_layer_registry.h). Internal to the exporter.
//
// Values carry one of two layouts. The engine's per-sample layout is
// channel-major ([N, C, ...]: a sequence is [N, D, L]); the transformer
// layers work sequence-major ([N, L, D], what LayerNormalization over the
// last axis, Gather from an embedding table and batched MatMuls want). The
// builder remembers which values are sequence-major and transposes a value
// only when a consumer wants the other layout, once per value, so a stack
// of transformer layers carries no Transpose between its layers.
//
// Ownership: the builder writes into a GraphProto the caller owns and
// reads tensors (OnnxTensorRef) the caller keeps alive. Thread safety:
// none; one thread builds one graph.
#ifndef COHORT_WORKER_ONNX_GRAPH_H_
#define COHORT_WORKER_ONNX_GRAPH_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "onnx/onnx_pb.h"
#include "proto/job.pb.h"
#include "worker/onnx_export.h"

namespace cohort {
namespace onnx_internal {

class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto* graph,
               const std::map<std::string, OnnxTensorRef>& tensors)
      : graph_(graph), tensors_(tensors) {}

  // The initializer for tensor `name` (added once, however many nodes use
  // it: a tied head shares the embedding's); its value's name.
  absl::StatusOr<std::string> Param(const std::string& name);
  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  const Shape& ShapeOf(const std::string& name) const {
    return tensors_.at(name).shape;
  }

  // A node of `op` over `inputs`; returns its (fresh) output's name.
  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs,
                        std::string* output);
  std::string Unary(const std::string& op, const std::string& in);
  std::string Binary(const std::string& op, const std::string& a,
                     const std::string& b);

  static void Ints(onnx::NodeProto* n, const std::string& name,
                   const std::vector<int64_t>& values);
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v);
  static void Float(onnx::NodeProto* n, const std::string& name, float v);

  // Constant initializers; each returns its value's name.
  std::string Scalar(float v);
  std::string Int64Scalar(int64_t v);                 // rank 0 (a Gather index)
  std::string Int64s(const std::vector<int64_t>& v);  // a Reshape's shape
  std::string Floats(const Shape& shape, const std::vector<float>& values);

  // The layout bookkeeping (see the file comment). `Sequence` marks a
  // value as sequence-major; `ChannelMajor` and `SequenceMajor` give a
  // value in that layout ([N, C, L] <-> [N, L, C], rank 3 only).
  void MarkSequence(const std::string& v) { sequence_.insert(v); }
  std::string ChannelMajor(const std::string& v);
  std::string SequenceMajor(const std::string& v);

  // The tied head's weight: the first embedding layer's parameter prefix
  // ("0."), empty before one was added.
  const std::string& embedding() const { return embedding_; }
  void set_embedding(const std::string& prefix) { embedding_ = prefix; }

  // Conv with weight `prefix`.weight (and .bias when present); the kernel
  // size comes from the weight's shape.
  absl::StatusOr<std::string> Conv(const std::string& in,
                                   const std::string& prefix, int64_t stride,
                                   int64_t pad, int64_t groups = 1,
                                   int64_t dilation = 1);
  absl::StatusOr<std::string> BatchNorm(const std::string& in,
                                        const std::string& prefix, float eps);
  // GELU in erf form (Gelu is an operator only from opset 20), or
  // PyTorch's tanh approximation.
  std::string Gelu(const std::string& x, bool tanh);
  // (x - mean) / sqrt(var + eps) over `axes` (GroupNorm's statistics).
  std::string Normalize(const std::string& x, const std::vector<int64_t>& axes,
                        float eps);
  // LayerNormalization from `axis` to the last axis, with `p`weight and
  // `p`bias of shape `normalized` (ones and no bias without them).
  absl::StatusOr<std::string> LayerNorm(const std::string& x,
                                        const std::string& p,
                                        const Shape& normalized, int64_t axis,
                                        float eps);
  // nn.GroupNorm over the per-sample shape `s`.
  absl::StatusOr<std::string> GroupNorm(const std::string& x,
                                        const std::string& p, const Shape& s,
                                        int64_t groups, float eps);
  // A ResNet block, as worker/layers/residual.h computes it.
  absl::StatusOr<std::string> Residual(const std::string& in,
                                       const std::string& p,
                                       const ResidualSpec& r);
  // nn.Linear `p`weight {O, I} (and `p`bias) at every row of a 2-D [M, I]
  // value.
  absl::StatusOr<std::string> Gemm(const std::string& x, const std::string& p);

 private:
  onnx::GraphProto* graph_;
  const std::map<std::string, OnnxTensorRef>& tensors_;
  std::set<std::string> added_;
  std::set<std::string> sequence_;
  std::map<std::string, std::string> transposed_;  // value -> other layout
  std::string embedding_;
};

// The per-sample output shape of a sequence layer (IsSequenceLayer,
// worker/onnx_layer_registry.h); `vocab` is the vocabulary of the model's
// first embedding (0 before one).
absl::StatusOr<Shape> SequenceLayerOutput(const LayerSpec& l,
                                          const Shape& in_shape, int64_t vocab);

}  // namespace onnx_internal
}  // namespace cohort

#endif  // COHORT_WORKER_ONNX_GRAPH_H_
