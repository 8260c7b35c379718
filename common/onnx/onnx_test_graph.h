// Small ONNX graphs built by hand for the importer's and the evaluator's
// tests, in the forms torch.onnx.export writes: one data input "x",
// initializers, Constant nodes and operators, and the one-line error an
// import must give.
//
// The k-th node (from 1) of operator Op is named /Op_k and its outputs
// Opk_0, Opk_1, ..., so an expected message can name them.
//
// Test-only. A Graph owns its ModelProto; not thread-safe.
#ifndef COHORT_COMMON_ONNX_ONNX_TEST_GRAPH_H_
#define COHORT_COMMON_ONNX_ONNX_TEST_GRAPH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_import.h"
#include "gtest/gtest.h"

namespace cohort {
namespace onnx_test {

using Dims = std::vector<int64_t>;

// A graph with one input "x" of [2, sample...] at `opset`: float, or int64
// token ids with `type` INT64. The evaluator's tests bind values by name
// and never read "x", so they leave `sample` empty.
class Graph {
 public:
  explicit Graph(const Dims& sample = {}, int64_t opset = 13,
                 int type = onnx::TensorProto::FLOAT) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
    onnx::ValueInfoProto* in = model_.mutable_graph()->add_input();
    in->set_name("x");
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    t->mutable_shape()->add_dim()->set_dim_value(2);
    for (int64_t d : sample) t->mutable_shape()->add_dim()->set_dim_value(d);
  }

  // A weight of `dims` holding step, 2 step, 3 step, ...: distinct values,
  // so a transposition shows.
  std::string Init(const std::string& name, const Dims& dims,
                   float step = 0.1f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(step * (i + 1));
    return AddInit(name, FloatTensor(dims, v));
  }

  // Initializers of the given values, named c1, c2, ...: unlike the
  // Constant nodes below they take no node number. Empty `dims` is a
  // scalar; InitInts is 1-D and InitInt a scalar.
  std::string InitFloats(const Dims& dims, const std::vector<float>& v) {
    return AddInit(NextInitName(), FloatTensor(dims, v));
  }
  std::string InitInts(const Dims& v) {
    return AddInit(NextInitName(), IntTensor({Size(v)}, v));
  }
  std::string InitInt(int64_t v) {
    return AddInit(NextInitName(), IntTensor({}, {v}));
  }

  // Constant nodes, as the exporter writes literals: a 1-D float or int64
  // tensor, or a float scalar.
  std::string Floats(const std::vector<float>& v) {
    return Constant(FloatTensor({Size(v)}, v));
  }
  std::string Ints(const Dims& v) { return Constant(IntTensor({Size(v)}, v)); }
  std::string Scalar(float v) { return Constant(FloatTensor({}, {v})); }

  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs,
                        int outputs = 1) {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    const int k = model_.graph().node_size();
    n->set_op_type(op);
    n->set_name(absl::StrCat("/", op, "_", k));
    for (const std::string& i : inputs) n->add_input(i);
    for (int o = 0; o < outputs; ++o) {
      n->add_output(absl::StrCat(op, k, "_", o));
    }
    return n;
  }

  // The single output of a new node.
  std::string Op(const std::string& op,
                 const std::vector<std::string>& inputs) {
    return Node(op, inputs)->output(0);
  }

  // Marks a value, or a node's first output, as a graph output.
  void Output(const std::string& name) {
    model_.mutable_graph()->add_output()->set_name(name);
  }
  void Output(const onnx::NodeProto* n) { Output(n->output(0)); }

  const onnx::ModelProto& model() const { return model_; }
  const onnx::GraphProto& graph() const { return model_.graph(); }

 private:
  template <typename T>
  static int64_t Size(const std::vector<T>& v) {
    return static_cast<int64_t>(v.size());
  }

  static onnx::TensorProto Tensor(int type, const Dims& dims) {
    onnx::TensorProto t;
    t.set_data_type(type);
    for (int64_t d : dims) t.add_dims(d);
    return t;
  }
  static onnx::TensorProto FloatTensor(const Dims& dims,
                                       const std::vector<float>& v) {
    onnx::TensorProto t = Tensor(onnx::TensorProto::FLOAT, dims);
    for (float f : v) t.add_float_data(f);
    return t;
  }
  static onnx::TensorProto IntTensor(const Dims& dims, const Dims& v) {
    onnx::TensorProto t = Tensor(onnx::TensorProto::INT64, dims);
    for (int64_t i : v) t.add_int64_data(i);
    return t;
  }

  std::string NextInitName() const {
    return absl::StrCat("c", model_.graph().initializer_size() + 1);
  }
  std::string AddInit(const std::string& name, onnx::TensorProto t) {
    t.set_name(name);
    *model_.mutable_graph()->add_initializer() = std::move(t);
    return name;
  }
  std::string Constant(onnx::TensorProto t) {
    onnx::NodeProto* n = Node("Constant", {});
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    *a->mutable_t() = std::move(t);
    return n->output(0);
  }

  onnx::ModelProto model_;
};

// Attributes of a node, by their value's type.
inline onnx::AttributeProto* Attribute(onnx::NodeProto* n,
                                       const std::string& name) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  return a;
}
inline void Str(onnx::NodeProto* n, const std::string& name,
                const std::string& v) {
  Attribute(n, name)->set_s(v);
}
inline void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  Attribute(n, name)->set_i(v);
}
inline void Float(onnx::NodeProto* n, const std::string& name, float v) {
  Attribute(n, name)->set_f(v);
}
inline void Ints(onnx::NodeProto* n, const std::string& name, const Dims& v) {
  onnx::AttributeProto* a = Attribute(n, name);
  for (int64_t i : v) a->add_ints(i);
}

// The message of an import that must fail: one line, kInvalidArgument.
inline std::string Error(const Graph& g) {
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  EXPECT_FALSE(m.ok());
  if (m.ok()) return "";
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(m.status().message()).find('\n'), std::string::npos);
  return std::string(m.status().message());
}

}  // namespace onnx_test
}  // namespace cohort

#endif  // COHORT_COMMON_ONNX_ONNX_TEST_GRAPH_H_
