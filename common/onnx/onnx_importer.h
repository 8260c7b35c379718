// The importer's walk over an ONNX graph (onnx_import.h): the chain and
// branch structure (onnx_import_walk.cc) and one mapping per ONNX operator
// (onnx_import_ops.cc, onnx_import_activations.cc, onnx_import_conv.cc).
//
// Internal to the importer. An Importer borrows the GraphView and the
// weight list it fills; it is used once, on one thread.
#ifndef COHORT_COMMON_ONNX_ONNX_IMPORTER_H_
#define COHORT_COMMON_ONNX_ONNX_IMPORTER_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/onnx/onnx_graph_view.h"
#include "common/safetensors.h"
#include "proto/job.pb.h"

namespace cohort {
namespace onnx_import_internal {

using Dims = std::vector<int64_t>;

// The layer list being filled (the model's, or a branch path's) and the
// prefix of its parameters' names ("" or "3.paths.1.").
struct Seq {
  google::protobuf::RepeatedPtrField<LayerSpec>* layers;
  std::string prefix;
};

// Where a walk is: the value it must reach and the nodes it may use.
struct Region {
  std::string to;
  const std::vector<char>* allowed;  // by node index
  Seq seq;
};

// A self-attention block found after a value (onnx_import_attention.cc):
// its nodes in topological order, the Softmax and the two projections
// (node indices), and the values after the out-projection where all its
// paths have met, the candidates for its end.
struct AttentionBlock {
  std::vector<int> nodes;
  int softmax = -1, in_proj = -1, out_proj = -1;
  std::vector<std::string> ends;
};

// An attention block's parameters in PyTorch's layout: in {3D, D} (rows
// Q, K, V), in_bias {3D}, out {D, D}, out_bias {D}.
struct AttentionWeights {
  ConstTensor in, in_bias, out, out_bias;
};

class Evaluator;

// Replaces each pair of top-level SUM branches that computes a pre-norm
// transformer block (layernorm, attention; layernorm, linear, GELU,
// linear, all per position) by one transformer_block, whose tensors keep
// the names the pair gave them (LayerSpec.tensor_names). `weights`, named
// by position, follow the layers to their new positions
// (onnx_import_fuse.cc).
void FuseTransformerBlocks(ModelSpec* model, std::vector<SafeTensor>* weights);

// Replaces each top-level SUM branch and the ReLU after it that compute
// one of torchvision's ResNet blocks (BasicBlock, Bottleneck) by one
// residual layer, named by the modules' common prefix ("layer1.0") or, failing
// one, keeping its tensors' names through LayerSpec.tensor_names. `weights`,
// named by position, follow the layers (onnx_import_residual.cc).
void FuseResidualBlocks(ModelSpec* model, std::vector<SafeTensor>* weights);

// The top-level layer index a position name starts with ("7" of
// "7.paths.1.0.weight"), -1 for none.
int TopIndex(const std::string& name);

// "[1, 7]" for messages.
std::string DimsString(const Dims& d);

// What cohort offers instead of ONNX operator `op` ("" when nothing is
// said about it).
std::string UnsupportedHint(const std::string& op);

class Importer {
 public:
  Importer(GraphView* graph, std::vector<SafeTensor>* weights)
      : g_(*graph), weights_(*weights) {}

  // Maps the nodes from value `from` to `region.to` into region.seq.
  absl::Status MapChain(const std::string& from, const Region& region);

  // The batch size the graph was exported with (torch traces x.size(0)
  // into a constant), -1 when symbolic.
  void set_export_batch(int64_t batch) { export_batch_ = batch; }
  // The default domain's opset version (Softmax's meaning changed in 13).
  void set_opset(int64_t opset) { opset_ = opset; }
  // A token model: the input holds token ids [N, L], and a value of
  // per-sample shape [L, D] is cohort's {D, L} sequence.
  void set_tokens(bool tokens) { tokens_ = tokens; }

 private:
  using Mapper = absl::StatusOr<std::string> (Importer::*)(int, const Region&);

  // The walk (onnx_import_walk.cc).
  std::vector<int> Next(const std::string& value, const Region& r) const;
  absl::StatusOr<std::string> MapFork(const std::string& w, const Region& r);
  absl::StatusOr<int> FindJoin(const std::string& w, const Region& r,
                               const std::vector<char>& reach);
  absl::StatusOr<std::vector<std::vector<char>>> PathSets(
      const std::string& w, int join, const std::vector<char>& reach);
  absl::Status JoinShapes(int join, BranchSpec::Combine combine,
                          const std::vector<std::string>& ends);
  absl::StatusOr<std::string> MapNode(int node, const Region& r);
  absl::Status CheckSideOutputs(int node, const Region& r) const;

  // Fused activations: SiLU, Hardswish and GELU's erf form, each spanning
  // several nodes (onnx_import_activations.cc). Sets *matched.
  absl::StatusOr<std::string> TryFused(const std::string& w, const Region& r,
                                       bool* matched);
  int SoleConsumer(const std::string& value, const Region& r) const;
  bool IsScalar(const std::string& value, double want);
  std::string Other(int node, const std::string& value) const;
  absl::StatusOr<std::string> MapGeluErf(const std::string& w, const Region& r,
                                         bool* matched);

  // Token models (onnx_import_sequence.cc). Refuses operators that read
  // [L, D] as channels first.
  absl::Status CheckTokenOp(int node) const;
  // nn.Embedding on the token ids.
  absl::StatusOr<std::string> MapGather(int node, const Region& r);
  // A learned position table added to the activations.
  absl::StatusOr<std::string> MapAdd(int node, const Region& r);
  absl::StatusOr<ConstTensor> PositionTable(int node, const std::string& value);
  // The Add of a bias of `outputs` values right after `node`, if any.
  bool FindBias(int node, int64_t outputs, const Region& r, ConstTensor* b);
  // W {out, in} of x @ W^T from input `i` of `node`, named after its
  // initializer when torch wrote it as Transpose(W).
  absl::StatusOr<ConstTensor> LinearWeight(int node, int i);
  // nn.LayerNorm over the last axis: LayerNormalization, or its parts.
  absl::StatusOr<std::string> MapLayerNorm(int node, const Region& r);
  absl::StatusOr<std::string> MapLayerNormParts(const std::string& w,
                                                const Region& r, bool* matched);
  absl::StatusOr<std::string> MapLayerNormTail(int mean, int sub,
                                               const Region& r, bool* matched);
  absl::StatusOr<std::string> AddLayerNorm(int node, int last, float eps,
                                           const ConstTensor* weight,
                                           const ConstTensor* bias,
                                           const Region& r);
  // The constant operand of binary `node` beside `data`, one per feature.
  absl::StatusOr<ConstTensor> Operand(int node, const std::string& data,
                                      const Dims& want);

  // Self-attention (onnx_import_attention.cc).
  absl::StatusOr<std::string> TryAttention(const std::string& w,
                                           const Region& r, bool* matched);
  AttentionBlock FindAttention(const std::string& w, const Region& r) const;
  absl::StatusOr<AttentionWeights> ReadAttentionWeights(
      const AttentionBlock& block, int64_t d);
  absl::StatusOr<ConstTensor> ProjectionWeight(int node, ConstTensor* bias);
  absl::StatusOr<std::string> MatchingEnd(const AttentionBlock& block,
                                          Evaluator* eval,
                                          const std::vector<double>& want,
                                          const Dims& shape,
                                          const std::string& label);
  absl::StatusOr<float> AttentionDropout(const AttentionBlock& block);
  void AddAttentionWeights(const AttentionWeights& w, const Region& r);

  // One ONNX operator each (onnx_import_ops.cc and
  // onnx_import_activations.cc): the value the walk continues from.
  absl::StatusOr<std::string> MapConv(int node, const Region& r);
  // ConvTranspose as conv_transpose2d (onnx_import_conv.cc, with MapConv).
  absl::StatusOr<std::string> MapConvTranspose(int node, const Region& r);
  absl::StatusOr<std::string> MapBatchNorm(int node, const Region& r);
  absl::StatusOr<std::string> MapPool(int node, const Region& r);
  absl::StatusOr<std::string> MapGlobalPool(int node, const Region& r);
  absl::StatusOr<std::string> MapFlatten(int node, const Region& r);
  absl::StatusOr<std::string> MapReshape(int node, const Region& r);
  absl::StatusOr<std::string> MapGemm(int node, const Region& r);
  absl::StatusOr<std::string> MapMatMul(int node, const Region& r);
  absl::StatusOr<std::string> MapDropout(int node, const Region& r);
  absl::StatusOr<std::string> MapIdentity(int node, const Region& r);
  absl::StatusOr<std::string> MapActivation(int node, const Region& r);
  absl::StatusOr<std::string> MapClip(int node, const Region& r);
  absl::StatusOr<std::string> MapSqueeze(int node, const Region& r);
  // A zero Pad is nothing; a symmetric one before a Conv or AveragePool
  // becomes that layer's padding (pending_pad_).
  absl::StatusOr<std::string> MapPad(int node, const Region& r);
  // Softmax along the channels, PRelu, and Resize or Upsample by an
  // integer factor (onnx_import_more_ops.cc).
  absl::StatusOr<std::string> MapSoftmax(int node, const Region& r);
  absl::StatusOr<std::string> MapPrelu(int node, const Region& r);
  absl::StatusOr<std::string> MapResize(int node, const Region& r);
  // PRelu's slope, read through the Unsqueeze torch puts before it.
  absl::StatusOr<ConstTensor> PreluSlope(int node);
  // The factors of [N, C, H, W] a Resize or Upsample node asks for, and
  // the one integer factor of H and W cohort takes.
  absl::StatusOr<std::vector<double>> ResizeFactors(int node, const Dims& in);
  absl::StatusOr<int64_t> ResizeScale(int node, const Dims& in);
  // Whether its mode and coordinates are nn.Upsample's.
  absl::Status CheckResizeMode(int node);
  // A reshape of `in` to per-sample `out`: nothing, a flatten layer, or a
  // refusal naming `node`.
  absl::StatusOr<std::string> ReshapeTo(int node, const Dims& in,
                                        const Dims& out, const Region& r);
  // The per-sample shape a Reshape node asks for.
  absl::StatusOr<Dims> ReshapeTarget(int node, const Dims& in);
  // Whether `node` (Flatten, Reshape or Squeeze) flattens `in` to {C}.
  bool IsFlatten(int node, const Dims& in);
  Mapper FindMapper(const std::string& op) const;

  // Helpers for the mappers.
  const Dims& In(int node) const;  // the shape of the node's data input
  LayerSpec* NewLayer(const Region& r) { return r.seq.layers->Add(); }
  // The constant input `i` of `node`, with `want` dims (empty: any).
  absl::StatusOr<ConstTensor> Weight(int node, int i, const Dims& want);
  // Adds `t` as parameter `name` of the layer just added to `r.seq`.
  void AddWeight(const Region& r, const std::string& name, ConstTensor t);
  // Names `layer` after the module its parameter `param` came from
  // (`source`, the initializer's name).
  void NameAfter(LayerSpec* layer, const std::string& param,
                 const std::string& source);
  std::string Done(int node, Dims shape);  // records the output's shape

  GraphView& g_;
  std::vector<SafeTensor>& weights_;
  int64_t export_batch_ = -1;
  int64_t opset_ = 13;
  bool tokens_ = false;
  // Padding a Pad node left for the Conv or AveragePool after it.
  int64_t pending_pad_ = 0;
  // Layers whose parameters came from different modules, or from none.
  std::set<const LayerSpec*> unnamed_;
};

}  // namespace onnx_import_internal
}  // namespace cohort

#endif  // COHORT_COMMON_ONNX_ONNX_IMPORTER_H_
