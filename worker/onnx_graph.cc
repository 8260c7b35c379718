#include "worker/onnx_graph.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_internal {

absl::StatusOr<std::string> GraphBuilder::Param(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::InternalError(absl::StrCat("no parameter ", name));
  }
  const std::string& saved = it->second.name.empty() ? name : it->second.name;
  if (added_.insert(name).second) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(saved);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : it->second.shape) t->add_dims(d);
    t->set_raw_data(it->second.data,
                    NumElements(it->second.shape) * sizeof(float));
  }
  return saved;
}

onnx::NodeProto* GraphBuilder::Node(const std::string& op,
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

std::string GraphBuilder::Unary(const std::string& op, const std::string& in) {
  std::string out;
  Node(op, {in}, &out);
  return out;
}

std::string GraphBuilder::Binary(const std::string& op, const std::string& a,
                                 const std::string& b) {
  std::string out;
  Node(op, {a, b}, &out);
  return out;
}

void GraphBuilder::Ints(onnx::NodeProto* n, const std::string& name,
                        const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void GraphBuilder::Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void GraphBuilder::Float(onnx::NodeProto* n, const std::string& name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

std::string GraphBuilder::Scalar(float v) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(absl::StrCat("const", graph_->initializer_size()));
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(v);
  return t->name();
}

std::string GraphBuilder::Int64Scalar(int64_t v) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(absl::StrCat("const", graph_->initializer_size()));
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_int64_data(v);
  return t->name();
}

std::string GraphBuilder::Int64s(const std::vector<int64_t>& v) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(absl::StrCat("const", graph_->initializer_size()));
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
  return t->name();
}

std::string GraphBuilder::Floats(const Shape& shape,
                                 const std::vector<float>& values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(absl::StrCat("const", graph_->initializer_size()));
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  t->set_raw_data(values.data(), values.size() * sizeof(float));
  return t->name();
}

std::string GraphBuilder::ChannelMajor(const std::string& v) {
  if (!sequence_.count(v)) return v;
  auto it = transposed_.find(v);
  if (it != transposed_.end()) return it->second;
  std::string out;
  Ints(Node("Transpose", {v}, &out), "perm", {0, 2, 1});
  transposed_[v] = out;
  transposed_[out] = v;
  return out;
}

std::string GraphBuilder::SequenceMajor(const std::string& v) {
  if (sequence_.count(v)) return v;
  auto it = transposed_.find(v);
  if (it != transposed_.end()) return it->second;
  std::string out;
  Ints(Node("Transpose", {v}, &out), "perm", {0, 2, 1});
  MarkSequence(out);
  transposed_[v] = out;
  transposed_[out] = v;
  return out;
}

absl::StatusOr<std::string> GraphBuilder::Conv(const std::string& in,
                                               const std::string& prefix,
                                               int64_t stride, int64_t pad,
                                               int64_t groups,
                                               int64_t dilation) {
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
  if (dilation > 1) Ints(n, "dilations", std::vector<int64_t>(dims, dilation));
  return out;
}

absl::StatusOr<std::string> GraphBuilder::BatchNorm(const std::string& in,
                                                    const std::string& prefix,
                                                    float eps) {
  std::vector<std::string> inputs = {in};
  for (const char* p : {".weight", ".bias", ".running_mean", ".running_var"}) {
    ASSIGN_OR_RETURN(std::string v, Param(prefix + p));
    inputs.push_back(v);
  }
  std::string out;
  Float(Node("BatchNormalization", inputs, &out), "epsilon", eps);
  return out;
}

std::string GraphBuilder::Gelu(const std::string& x, bool tanh) {
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

std::string GraphBuilder::Normalize(const std::string& x,
                                    const std::vector<int64_t>& axes,
                                    float eps) {
  std::string mean, var;
  Ints(Node("ReduceMean", {x}, &mean), "axes", axes);
  const std::string d = Binary("Sub", x, mean);
  Ints(Node("ReduceMean", {Binary("Mul", d, d)}, &var), "axes", axes);
  return Binary("Div", d, Unary("Sqrt", Binary("Add", var, Scalar(eps))));
}

absl::StatusOr<std::string> GraphBuilder::LayerNorm(const std::string& x,
                                                    const std::string& p,
                                                    const Shape& normalized,
                                                    int64_t axis, float eps) {
  std::vector<std::string> inputs = {x};
  if (Has(p + "weight")) {
    ASSIGN_OR_RETURN(std::string w, Param(p + "weight"));
    ASSIGN_OR_RETURN(std::string b, Param(p + "bias"));
    inputs.push_back(w);
    inputs.push_back(b);
  } else {
    // no_affine: LayerNormalization's Scale is not optional.
    inputs.push_back(
        Floats(normalized, std::vector<float>(NumElements(normalized), 1.0f)));
  }
  std::string out;
  onnx::NodeProto* n = Node("LayerNormalization", inputs, &out);
  Int(n, "axis", axis);
  Float(n, "epsilon", eps);
  return out;
}

absl::StatusOr<std::string> GraphBuilder::GroupNorm(const std::string& x,
                                                    const std::string& p,
                                                    const Shape& s,
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

absl::StatusOr<std::string> GraphBuilder::Residual(const std::string& in,
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
    ASSIGN_OR_RETURN(shortcut, BatchNorm(shortcut, p + "downsample.1", 1e-5f));
  }
  return Unary("Relu", Binary("Add", y, shortcut));
}

absl::StatusOr<std::string> GraphBuilder::Gemm(const std::string& x,
                                               const std::string& p) {
  std::vector<std::string> inputs = {x};
  ASSIGN_OR_RETURN(std::string w, Param(p + "weight"));
  inputs.push_back(w);
  if (Has(p + "bias")) {
    ASSIGN_OR_RETURN(std::string b, Param(p + "bias"));
    inputs.push_back(b);
  }
  std::string out;
  Int(Node("Gemm", inputs, &out), "transB", 1);
  return out;
}

}  // namespace onnx_internal
}  // namespace cohort
