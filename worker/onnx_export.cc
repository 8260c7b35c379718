#include "worker/onnx_export.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"
#include "onnx/onnx_pb.h"
#include "worker/onnx_graph.h"

namespace cohort {
namespace {

using onnx_internal::AddSequenceLayer;
using onnx_internal::GraphBuilder;
using onnx_internal::IsSequenceLayer;

// The layer of spec `l` whose parameters are named `prefix`.NAME ("3", or
// "3.paths.0.1" inside a branch) on value `in`; its output's name.
// `in_shape` and `out_shape` are the layer's per-sample input and output
// shapes.
absl::StatusOr<std::string> AddLayer(GraphBuilder& g, const LayerSpec& l,
                                     const std::string& prefix,
                                     const std::string& in_value,
                                     const Shape& in_shape,
                                     const Shape& out_shape) {
  if (IsSequenceLayer(l)) {
    return AddSequenceLayer(g, l, prefix, in_value, in_shape);
  }
  // Every other layer takes the engine's channel-major layout.
  const std::string in = g.ChannelMajor(in_value);
  const std::string p = prefix + ".";
  switch (l.kind_case()) {
    case LayerSpec::kLinear:
      return g.Gemm(in, p);
    case LayerSpec::kConv1D:
    case LayerSpec::kConv2D: {
      const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
      return g.Conv(in, prefix, c.stride() > 0 ? c.stride() : 1, c.padding(),
                    c.groups() > 0 ? c.groups() : 1,
                    c.dilation() > 0 ? c.dilation() : 1);
    }
    case LayerSpec::kBatchnorm1D:
    case LayerSpec::kBatchnorm2D: {
      const BatchNormSpec& b =
          l.has_batchnorm1d() ? l.batchnorm1d() : l.batchnorm2d();
      return g.BatchNorm(in, prefix, b.eps() > 0 ? b.eps() : 1e-5f);
    }
    case LayerSpec::kRelu:
      return g.Unary("Relu", in);
    case LayerSpec::kMaxpool2D:
    case LayerSpec::kAvgpool2D: {
      const bool max = l.has_maxpool2d();
      const PoolSpec& s = max ? l.maxpool2d() : l.avgpool2d();
      const int64_t stride = s.stride() > 0 ? s.stride() : s.kernel();
      std::string out;
      onnx::NodeProto* n = g.Node(max ? "MaxPool" : "AveragePool", {in}, &out);
      GraphBuilder::Ints(n, "kernel_shape", {s.kernel(), s.kernel()});
      GraphBuilder::Ints(n, "strides", {stride, stride});
      GraphBuilder::Ints(n, "pads", std::vector<int64_t>(4, s.padding()));
      // worker/layers/pool.h: padding counts in the divisor, as PyTorch.
      if (!max) GraphBuilder::Int(n, "count_include_pad", 1);
      return out;
    }
    case LayerSpec::kGlobalAvgpool: {
      std::string pooled = g.Unary("GlobalAveragePool", in);
      // cohort's global pool gives [C]; ONNX's keeps [C, 1, 1].
      if (out_shape.size() == 1) {
        std::string out;
        GraphBuilder::Int(g.Node("Flatten", {pooled}, &out), "axis", 1);
        return out;
      }
      return pooled;
    }
    case LayerSpec::kFlatten: {
      std::string out;
      GraphBuilder::Int(g.Node("Flatten", {in}, &out), "axis", 1);
      return out;
    }
    case LayerSpec::kDropout:
      return in;  // inference: the identity
    case LayerSpec::kResidual:
      return g.Residual(in, p, l.residual());
    case LayerSpec::kGelu:
      return g.Gelu(in, l.gelu().tanh_approximation());
    case LayerSpec::kSilu:
      return g.Binary("Mul", in, g.Unary("Sigmoid", in));
    case LayerSpec::kTanh:
      return g.Unary("Tanh", in);
    case LayerSpec::kSigmoid:
      return g.Unary("Sigmoid", in);
    case LayerSpec::kLeakyRelu: {
      std::string out;
      GraphBuilder::Float(g.Node("LeakyRelu", {in}, &out), "alpha",
                          static_cast<float>(LeakyReluSlope(l.leaky_relu())));
      return out;
    }
    case LayerSpec::kLayernorm: {
      const LayerNormSpec& s = l.layernorm();
      // Over the whole per-sample shape: axes 1.. of [N, *shape].
      return g.LayerNorm(in, p, out_shape, 1, s.eps() > 0 ? s.eps() : 1e-5f);
    }
    case LayerSpec::kGroupnorm: {
      const GroupNormSpec& s = l.groupnorm();
      return g.GroupNorm(in, p, out_shape, s.groups(),
                         s.eps() > 0 ? s.eps() : 1e-5f);
    }
    case LayerSpec::kMaxpool1D:
    case LayerSpec::kAvgpool1D: {
      const bool max = l.has_maxpool1d();
      const PoolSpec& s = max ? l.maxpool1d() : l.avgpool1d();
      const int64_t stride = s.stride() > 0 ? s.stride() : s.kernel();
      std::string out;
      onnx::NodeProto* n = g.Node(max ? "MaxPool" : "AveragePool", {in}, &out);
      GraphBuilder::Ints(n, "kernel_shape", {s.kernel()});
      GraphBuilder::Ints(n, "strides", {stride});
      GraphBuilder::Ints(n, "pads", {s.padding(), s.padding()});
      if (!max) GraphBuilder::Int(n, "count_include_pad", 1);
      return out;
    }
    case LayerSpec::kBranch: {
      // Each path a chain of nodes from `in` (an empty one is `in`), then
      // Concat along the channels (features) or a chain of Adds.
      const BranchSpec& b = l.branch();
      std::vector<std::string> outs;
      for (int k = 0; k < b.paths_size(); ++k) {
        std::string cur = in;
        const std::vector<LayerSpec> path(b.paths(k).layers().begin(),
                                          b.paths(k).layers().end());
        ASSIGN_OR_RETURN(const std::vector<Shape> sizes,
                         OnnxLayerOutputs(path, in_shape));
        for (int j = 0; j < b.paths(k).layers_size(); ++j) {
          const Shape& sub_in = j == 0 ? in_shape : sizes[j - 1];
          ASSIGN_OR_RETURN(cur, AddLayer(g, b.paths(k).layers(j),
                                         absl::StrCat(p, "paths.", k, ".", j),
                                         cur, sub_in, sizes[j]));
        }
        outs.push_back(g.ChannelMajor(cur));
      }
      std::string out;
      if (b.combine() == BranchSpec::CONCAT) {
        GraphBuilder::Int(g.Node("Concat", outs, &out), "axis", 1);
        return out;
      }
      out = outs[0];
      for (size_t k = 1; k < outs.size(); ++k) {
        out = g.Binary("Add", out, outs[k]);
      }
      return out;
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("layer ", prefix, " has no ONNX form"));
  }
}

void AddValueInfo(onnx::ValueInfoProto* v, const std::string& name,
                  const Shape& per_sample) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  for (int64_t d : per_sample) s->add_dim()->set_dim_value(d);
}

}  // namespace

absl::StatusOr<std::vector<Shape>> OnnxLayerOutputs(
    const std::vector<LayerSpec>& layers, const Shape& input_shape) {
  // One layer at a time, so that the transformer layers (whose sizes this
  // file knows) and the others (common/model_sizes.h) can mix.
  std::vector<Shape> outs;
  int64_t vocab = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Shape& in = i == 0 ? input_shape : outs.back();
    if (IsSequenceLayer(layers[i])) {
      ASSIGN_OR_RETURN(
          Shape out, onnx_internal::SequenceLayerOutput(layers[i], in, vocab));
      outs.push_back(std::move(out));
      if (layers[i].has_embedding() && vocab == 0) {
        vocab = layers[i].embedding().vocab_size();
      }
      continue;
    }
    ASSIGN_OR_RETURN(const ModelSizes sizes, InferModelSizes({layers[i]}, in));
    outs.push_back(sizes.layers[0].output);
  }
  return outs;
}

absl::StatusOr<std::string> OnnxModelBytes(const OnnxSource& source) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("cohort");
  m.set_model_version(source.step);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  auto meta = [&m](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* e = m.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  };
  meta("cohort.job_spec", source.spec_text);
  meta("cohort.step", absl::StrCat(source.step));
  const bool tokens =
      !source.layers.empty() && source.layers[0].has_embedding();
  meta("cohort.input",
       tokens ? "token ids as floats, [batch, 1, L], as the TOKENS data set "
                "gives them (exact below 2^24); output: logits [batch, "
                "vocab, L]"
              : "the samples as the training data set gave them, "
                "normalisation included (see cohort.job_spec's data block); "
                "nothing is folded in");
  onnx::GraphProto* graph = m.mutable_graph();
  graph->set_name(source.name);
  AddValueInfo(graph->add_input(), "input", source.input_shape);
  std::vector<Shape> outs = source.layer_outputs;
  if (outs.empty()) {
    ASSIGN_OR_RETURN(outs, OnnxLayerOutputs(source.layers, source.input_shape));
  }
  GraphBuilder g(graph, source.tensors);
  std::string cur = "input";
  for (size_t i = 0; i < source.layers.size(); ++i) {
    ASSIGN_OR_RETURN(
        cur, AddLayer(g, source.layers[i], absl::StrCat(i), cur,
                      i == 0 ? source.input_shape : outs[i - 1], outs[i]));
  }
  // The graph's output under a fixed name, in the engine's layout.
  onnx::NodeProto* id = graph->add_node();
  id->set_op_type("Identity");
  id->set_name("output_identity");
  id->add_input(g.ChannelMajor(cur));
  id->add_output("output");
  AddValueInfo(graph->add_output(), "output",
               outs.empty() ? source.input_shape : outs.back());
  return m.SerializeAsString();
}

absl::StatusOr<std::string> OnnxModelBytes(TrainedModel& trained) {
  Model<float>& model = *trained.model;
  OnnxSource source;
  if (!trained.spec.name().empty()) source.name = trained.spec.name();
  source.spec_text = trained.spec_text;
  source.step = trained.step;
  ASSIGN_OR_RETURN(source.layers, LayerSpecs(trained.spec.model()));
  source.input_shape = trained.input_shape;
  source.layer_outputs = model.layer_outputs();
  for (const auto& e : model.param_store().entries()) {
    source.tensors[e.name] = {model.params().data() + e.offset, e.shape};
  }
  const std::vector<std::string> names = model.BufferNames();
  const std::vector<Tensor*> buffers = model.Buffers();
  for (size_t i = 0; i < names.size(); ++i) {
    source.tensors[names[i]] = {buffers[i]->data(), buffers[i]->shape()};
  }
  return OnnxModelBytes(source);
}

}  // namespace cohort
