#include "worker/onnx_export.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"
#include "onnx/onnx_pb.h"

namespace cohort {
namespace {

constexpr int kOpset = 13;

// Builds the graph node by node, naming intermediate values.
class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto* graph, TrainedModel& trained)
      : graph_(graph), model_(*trained.model) {
    for (const auto& e : model_.param_store().entries()) {
      params_[e.name] = {model_.params().data() + e.offset, e.shape};
    }
    const std::vector<std::string> names = model_.BufferNames();
    const std::vector<Tensor*> buffers = model_.Buffers();
    for (size_t i = 0; i < names.size(); ++i) {
      params_[names[i]] = {buffers[i]->data(), buffers[i]->shape()};
    }
  }

  // The initializer for parameter `name` (added once); its value's name.
  absl::StatusOr<std::string> Param(const std::string& name) {
    auto it = params_.find(name);
    if (it == params_.end()) {
      return absl::InternalError(absl::StrCat("no parameter ", name));
    }
    if (added_.insert(name).second) {
      onnx::TensorProto* t = graph_->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : it->second.shape) t->add_dims(d);
      t->set_raw_data(it->second.data,
                      NumElements(it->second.shape) * sizeof(float));
    }
    return name;
  }
  bool Has(const std::string& name) const { return params_.count(name) > 0; }
  const Shape& ShapeOf(const std::string& name) const {
    return params_.at(name).shape;
  }

  // A node of `op` over `inputs`; returns its (fresh) output's name.
  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs,
                        std::string* output) {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(absl::StrCat(op, "_", graph_->node_size()));
    for (const std::string& i : inputs) n->add_input(i);
    *output = absl::StrCat("t", graph_->node_size());
    n->add_output(*output);
    return n;
  }

  static void Ints(onnx::NodeProto* n, const std::string& name,
                   const std::vector<int64_t>& values) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void Float(onnx::NodeProto* n, const std::string& name, float v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }

  // Conv with weight `prefix`.weight (and .bias when present); the kernel
  // size comes from the weight's shape.
  absl::StatusOr<std::string> Conv(const std::string& in,
                                   const std::string& prefix, int64_t stride,
                                   int64_t pad, int64_t groups = 1,
                                   int64_t dilation = 1) {
    std::vector<std::string> inputs = {in};
    ASSIGN_OR_RETURN(std::string w, Param(prefix + ".weight"));
    inputs.push_back(w);
    if (Has(prefix + ".bias")) {
      ASSIGN_OR_RETURN(std::string b, Param(prefix + ".bias"));
      inputs.push_back(b);
    }
    const Shape& ws = ShapeOf(prefix + ".weight");
    const size_t dims = ws.size() - 2;
    std::string out;
    onnx::NodeProto* n = Node("Conv", inputs, &out);
    Ints(n, "kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
    Ints(n, "strides", std::vector<int64_t>(dims, stride));
    Ints(n, "pads", std::vector<int64_t>(2 * dims, pad));
    if (groups > 1) Int(n, "group", groups);
    if (dilation > 1)
      Ints(n, "dilations", std::vector<int64_t>(dims, dilation));
    return out;
  }

  absl::StatusOr<std::string> BatchNorm(const std::string& in,
                                        const std::string& prefix, float eps) {
    std::vector<std::string> inputs = {in};
    for (const char* p :
         {".weight", ".bias", ".running_mean", ".running_var"}) {
      ASSIGN_OR_RETURN(std::string v, Param(prefix + p));
      inputs.push_back(v);
    }
    std::string out;
    Float(Node("BatchNormalization", inputs, &out), "epsilon", eps);
    return out;
  }

  // A float scalar initializer; its value's name.
  std::string Scalar(float v) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(absl::StrCat("const", graph_->initializer_size()));
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
    return t->name();
  }
  // An int64 vector initializer (a Reshape's shape); its value's name.
  std::string Int64s(const std::vector<int64_t>& v) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(absl::StrCat("const", graph_->initializer_size()));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }
  std::string Binary(const std::string& op, const std::string& a,
                     const std::string& b) {
    std::string out;
    Node(op, {a, b}, &out);
    return out;
  }

  // GELU in erf form (Gelu is an operator only from opset 20), or PyTorch's
  // tanh approximation.
  std::string Gelu(const std::string& x, bool tanh) {
    std::string inner;
    if (tanh) {
      const std::string cube = Binary("Mul", x, Binary("Mul", x, x));
      inner = Binary("Mul", Scalar(0.7978845608028654f),
                     Binary("Add", x, Binary("Mul", Scalar(0.044715f), cube)));
      inner = Unary("Tanh", inner);
    } else {
      inner = Unary("Erf", Binary("Mul", x, Scalar(0.7071067811865476f)));
    }
    const std::string half_x = Binary("Mul", x, Scalar(0.5f));
    return Binary("Mul", half_x, Binary("Add", inner, Scalar(1.0f)));
  }

  // (x - mean) / sqrt(var + eps) over `axes` (LayerNormalization needs
  // opset 17; this exporter writes 13).
  std::string Normalize(const std::string& x, const std::vector<int64_t>& axes,
                        float eps) {
    std::string mean, var;
    Ints(Node("ReduceMean", {x}, &mean), "axes", axes);
    const std::string d = Binary("Sub", x, mean);
    Ints(Node("ReduceMean", {Binary("Mul", d, d)}, &var), "axes", axes);
    return Binary("Div", d, Unary("Sqrt", Binary("Add", var, Scalar(eps))));
  }

  // nn.LayerNorm over the whole per-sample shape `s`.
  absl::StatusOr<std::string> LayerNorm(const std::string& x,
                                        const std::string& p, const Shape& s,
                                        float eps) {
    std::vector<int64_t> axes;
    for (size_t i = 1; i <= s.size(); ++i) axes.push_back(i);
    std::string y = Normalize(x, axes, eps);
    if (!Has(p + "weight")) return y;
    ASSIGN_OR_RETURN(std::string w, Param(p + "weight"));
    ASSIGN_OR_RETURN(std::string b, Param(p + "bias"));
    return Binary("Add", Binary("Mul", y, w), b);
  }

  // nn.GroupNorm: statistics over [N, G, rest], then the per-channel affine
  // broadcast as [C, 1, ...].
  absl::StatusOr<std::string> GroupNorm(const std::string& x,
                                        const std::string& p, const Shape& s,
                                        int64_t groups, float eps) {
    std::string grouped, y;
    Node("Reshape", {x, Int64s({0, groups, -1})}, &grouped);
    std::vector<int64_t> back = {0};
    back.insert(back.end(), s.begin(), s.end());
    Node("Reshape", {Normalize(grouped, {2}, eps), Int64s(back)}, &y);
    if (!Has(p + "weight")) return y;
    std::vector<int64_t> per_channel(s.size(), 1);
    per_channel[0] = s[0];
    const std::string shape = Int64s(per_channel);
    ASSIGN_OR_RETURN(std::string w, Param(p + "weight"));
    ASSIGN_OR_RETURN(std::string b, Param(p + "bias"));
    std::string wc, bc;
    Node("Reshape", {w, shape}, &wc);
    Node("Reshape", {b, shape}, &bc);
    return Binary("Add", Binary("Mul", y, wc), bc);
  }

  std::string Unary(const std::string& op, const std::string& in) {
    std::string out;
    Node(op, {in}, &out);
    return out;
  }

  // A ResNet block, as worker/layers/residual.h computes it.
  absl::StatusOr<std::string> Residual(const std::string& in,
                                       const std::string& p,
                                       const ResidualSpec& r) {
    const int64_t s = r.stride();
    std::string y;
    if (r.bottleneck()) {
      ASSIGN_OR_RETURN(y, Conv(in, p + "conv1", 1, 0));
      ASSIGN_OR_RETURN(y, BatchNorm(y, p + "bn1", 1e-5f));
      y = Unary("Relu", y);
      ASSIGN_OR_RETURN(y, Conv(y, p + "conv2", s, 1));
      ASSIGN_OR_RETURN(y, BatchNorm(y, p + "bn2", 1e-5f));
      y = Unary("Relu", y);
      ASSIGN_OR_RETURN(y, Conv(y, p + "conv3", 1, 0));
      ASSIGN_OR_RETURN(y, BatchNorm(y, p + "bn3", 1e-5f));
    } else {
      ASSIGN_OR_RETURN(y, Conv(in, p + "conv1", s, 1));
      ASSIGN_OR_RETURN(y, BatchNorm(y, p + "bn1", 1e-5f));
      y = Unary("Relu", y);
      ASSIGN_OR_RETURN(y, Conv(y, p + "conv2", 1, 1));
      ASSIGN_OR_RETURN(y, BatchNorm(y, p + "bn2", 1e-5f));
    }
    std::string shortcut = in;
    if (Has(p + "downsample.0.weight")) {
      ASSIGN_OR_RETURN(shortcut, Conv(in, p + "downsample.0", s, 0));
      ASSIGN_OR_RETURN(shortcut,
                       BatchNorm(shortcut, p + "downsample.1", 1e-5f));
    }
    std::string sum;
    Node("Add", {y, shortcut}, &sum);
    return Unary("Relu", sum);
  }

 private:
  struct ParamRef {
    const float* data;
    Shape shape;
  };
  onnx::GraphProto* graph_;
  Model<float>& model_;
  std::map<std::string, ParamRef> params_;
  std::set<std::string> added_;
};

// The layer of spec `l` whose parameters are named `prefix`.NAME ("3", or
// "3.paths.0.1" inside a branch) on value `in`; its output's name.
// `in_shape` and `out_shape` are the layer's per-sample input and output
// shapes.
absl::StatusOr<std::string> AddLayer(GraphBuilder& g, const LayerSpec& l,
                                     const std::string& prefix,
                                     const std::string& in,
                                     const Shape& in_shape,
                                     const Shape& out_shape) {
  const std::string p = prefix + ".";
  switch (l.kind_case()) {
    case LayerSpec::kLinear: {
      std::vector<std::string> inputs = {in};
      ASSIGN_OR_RETURN(std::string w, g.Param(p + "weight"));
      inputs.push_back(w);
      if (g.Has(p + "bias")) {
        ASSIGN_OR_RETURN(std::string b, g.Param(p + "bias"));
        inputs.push_back(b);
      }
      std::string out;
      GraphBuilder::Int(g.Node("Gemm", inputs, &out), "transB", 1);
      return out;
    }
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
      return g.LayerNorm(in, p, out_shape, s.eps() > 0 ? s.eps() : 1e-5f);
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
        ASSIGN_OR_RETURN(const ModelSizes sizes,
                         InferModelSizes(path, in_shape));
        for (int j = 0; j < b.paths(k).layers_size(); ++j) {
          const Shape& sub_in = j == 0 ? in_shape : sizes.layers[j - 1].output;
          ASSIGN_OR_RETURN(cur, AddLayer(g, b.paths(k).layers(j),
                                         absl::StrCat(p, "paths.", k, ".", j),
                                         cur, sub_in, sizes.layers[j].output));
        }
        outs.push_back(cur);
      }
      std::string out;
      if (b.combine() == BranchSpec::CONCAT) {
        GraphBuilder::Int(g.Node("Concat", outs, &out), "axis", 1);
        return out;
      }
      out = outs[0];
      for (size_t k = 1; k < outs.size(); ++k) {
        std::string sum;
        g.Node("Add", {out, outs[k]}, &sum);
        out = sum;
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

absl::StatusOr<std::string> OnnxModelBytes(TrainedModel& trained) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("cohort");
  m.set_model_version(trained.step);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  auto meta = [&m](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* e = m.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  };
  meta("cohort.job_spec", trained.spec_text);
  meta("cohort.step", absl::StrCat(trained.step));
  meta("cohort.input",
       "the samples as the training data set gave them, normalisation "
       "included (see cohort.job_spec's data block); nothing is folded in");
  onnx::GraphProto* graph = m.mutable_graph();
  graph->set_name(trained.spec.name().empty() ? "cohort" : trained.spec.name());
  AddValueInfo(graph->add_input(), "input", trained.input_shape);
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> layers,
                   LayerSpecs(trained.spec.model()));
  GraphBuilder g(graph, trained);
  std::string cur = "input";
  const std::vector<Shape>& outs = trained.model->layer_outputs();
  for (size_t i = 0; i < layers.size(); ++i) {
    ASSIGN_OR_RETURN(
        cur, AddLayer(g, layers[i], absl::StrCat(i), cur,
                      i == 0 ? trained.input_shape : outs[i - 1], outs[i]));
  }
  // The graph's output under a fixed name.
  onnx::NodeProto* id = graph->add_node();
  id->set_op_type("Identity");
  id->set_name("output_identity");
  id->add_input(cur);
  id->add_output("output");
  AddValueInfo(graph->add_output(), "output", trained.model->output_shape());
  return m.SerializeAsString();
}

}  // namespace cohort
