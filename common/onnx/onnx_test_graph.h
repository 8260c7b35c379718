// Small ONNX graphs built by hand for the importer's tests, in the forms
// torch.onnx.export writes: one data input "x", initializers, Constant
// nodes and operators, and the one-line error an import must give.
//
// Test-only. A Graph owns its ModelProto; not thread-safe.
#ifndef COHORT_COMMON_ONNX_ONNX_TEST_GRAPH_H_
#define COHORT_COMMON_ONNX_ONNX_TEST_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_import.h"
#include "gtest/gtest.h"

namespace cohort {
namespace onnx_test {

using Dims = std::vector<int64_t>;

// A graph with one input "x" of [2, sample...] at `opset`: float, or int64
// token ids with `type` INT64.
class Graph {
 public:
  explicit Graph(const Dims& sample, int64_t opset = 13,
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

  // An initializer of `dims` holding 0.1, 0.2, ...
  std::string Init(const std::string& name, const Dims& dims) {
    onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(0.1f * (i + 1));
    return name;
  }

  // A Constant node of a 1-D float or int64 tensor.
  std::string Floats(const std::vector<float>& v) {
    onnx::TensorProto* t = Constant();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(v.size());
    for (float f : v) t->add_float_data(f);
    return last_output_;
  }
  std::string Ints(const Dims& v) {
    onnx::TensorProto* t = Constant();
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(v.size());
    for (int64_t i : v) t->add_int64_data(i);
    return last_output_;
  }

  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs) {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    const int k = model_.graph().node_size();
    n->set_op_type(op);
    n->set_name(absl::StrCat("/", op, "_", k));
    for (const std::string& i : inputs) n->add_input(i);
    last_output_ = absl::StrCat(op, k);
    n->add_output(last_output_);
    return n;
  }

  void Output(const onnx::NodeProto* n) {
    model_.mutable_graph()->add_output()->set_name(n->output(0));
  }

  const onnx::ModelProto& model() const { return model_; }

 private:
  onnx::TensorProto* Constant() {
    onnx::AttributeProto* a = Node("Constant", {})->add_attribute();
    a->set_name("value");
    return a->mutable_t();
  }

  onnx::ModelProto model_;
  std::string last_output_;
};

inline void Str(onnx::NodeProto* n, const std::string& name,
                const std::string& value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_s(value);
}

inline void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_i(v);
}

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
