// The importer's token models (onnx_import_sequence.cc) on small
// hand-built graphs: token ids in, nn.Embedding, a position table,
// LayerNorm in both spellings, per-position nn.Linear, and one test per
// refusal. Attention, and whole PyTorch models, are checked against
// PyTorch by tests/pytorch_transformer_test.
#include <string>
#include <vector>

#include "common/onnx/onnx_import.h"
#include "common/onnx/onnx_test_graph.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using onnx_test::Dims;
using onnx_test::Error;
using onnx_test::Graph;
using onnx_test::Int;

constexpr int kIds = onnx::TensorProto::INT64;

// ids [2, 4] -> embed (10 x 6) + pos (4 x 6, as nn.Embedding of arange).
std::string Embedded(Graph* g) {
  const std::string tokens =
      g->Node("Gather", {g->Init("embed.weight", {10, 6}), "x"})->output(0);
  const std::string pos =
      g->Node("Gather", {g->Init("pos.weight", {4, 6}), g->Ints({0, 1, 2, 3})})
          ->output(0);
  return g->Node("Add", {tokens, pos})->output(0);
}

// x @ Transpose(W)^T + b, as torch exports nn.Linear on [N, L, D].
onnx::NodeProto* Linear(Graph* g, const std::string& in,
                        const std::string& name, int64_t out, int64_t d) {
  onnx::NodeProto* t =
      g->Node("Transpose", {g->Init(name + ".weight", {out, d})});
  onnx::AttributeProto* perm = t->add_attribute();
  perm->set_name("perm");
  perm->add_ints(1);
  perm->add_ints(0);
  const std::string y = g->Node("MatMul", {in, t->output(0)})->output(0);
  return g->Node("Add", {g->Init(name + ".bias", {out}), y});
}

TEST(OnnxImportSequence, TokenModelLayersKeepTheirModulesNames) {
  Graph g({4}, 17, kIds);
  const std::string h = Embedded(&g);
  const std::string n =
      g.Node("LayerNormalization",
             {h, g.Init("ln.weight", {6}), g.Init("ln.bias", {6})})
          ->output(0);
  g.Output(Linear(&g, n, "head", 5, 6));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->input_shape, (Dims{1, 4}));
  EXPECT_EQ(m->output_shape, (Dims{5, 4}));  // cohort's {V, L}
  ASSERT_EQ(m->model.layers_size(), 4);
  EXPECT_EQ(m->model.layers(0).embedding().vocab_size(), 10);
  EXPECT_EQ(m->model.layers(0).embedding().dim(), 6);
  EXPECT_TRUE(m->model.layers(1).has_positional_embedding());
  EXPECT_TRUE(m->model.layers(2).layernorm().per_position());
  EXPECT_TRUE(m->model.layers(3).linear().per_position());
  EXPECT_EQ(m->model.layers(3).linear().out_features(), 5);
  std::vector<std::string> names;
  for (const SafeTensor& t : m->weights) names.push_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"embed.weight", "pos.weight", "ln.weight",
                                      "ln.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(m->weights[4].shape, (Dims{5, 6}));  // nn.Linear's {out, in}
}

// --input-shape of a token model is its length: L, or cohort's {1, L}.
TEST(OnnxImportSequence, InputShapeOfTokensIsTheLength) {
  Graph g({4}, 17, kIds);
  g.Output(Linear(&g, Embedded(&g), "head", 5, 6));
  for (const Dims& given : {Dims{4}, Dims{1, 4}}) {
    OnnxImportOptions o;
    o.input_shape = given;
    absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), o);
    ASSERT_TRUE(m.ok()) << given.size() << " dims: " << m.status();
    EXPECT_EQ(m->input_shape, (Dims{1, 4}));
  }
  OnnxImportOptions o;
  o.input_shape = {2, 2, 4};
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("token ids: give L"), std::string::npos)
      << m.status();
}

TEST(OnnxImportSequence, LayerNormInPartsIsOneLayer) {
  Graph g({4}, 13, kIds);
  const std::string h = Embedded(&g);
  onnx::NodeProto* mean = g.Node("ReduceMean", {h});
  onnx::AttributeProto* axes = mean->add_attribute();
  axes->set_name("axes");
  axes->add_ints(-1);
  const std::string sub = g.Node("Sub", {h, mean->output(0)})->output(0);
  onnx::NodeProto* var =
      g.Node("ReduceMean", {g.Node("Pow", {sub, g.Floats({2})})->output(0)});
  *var->add_attribute() = *axes;
  const std::string sd =
      g.Node("Sqrt",
             {g.Node("Add", {var->output(0), g.Floats({1e-6f})})->output(0)})
          ->output(0);
  const std::string z = g.Node("Div", {sub, sd})->output(0);
  const std::string scaled =
      g.Node("Mul", {z, g.Init("ln.weight", {6})})->output(0);
  g.Output(g.Node("Add", {scaled, g.Init("ln.bias", {6})}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 3);
  const LayerSpec& ln = m->model.layers(2);
  EXPECT_TRUE(ln.layernorm().per_position());
  EXPECT_FLOAT_EQ(ln.layernorm().eps(), 1e-6f);
  EXPECT_EQ(ln.name(), "ln");
}

TEST(OnnxImportSequence, AFixedPositionTableIsRefused) {
  Graph g({4}, 17, kIds);
  const std::string tokens =
      g.Node("Gather", {g.Init("embed.weight", {10, 6}), "x"})->output(0);
  g.Output(g.Node("Add", {tokens, g.Init("pos", {1, 4, 6})}));
  EXPECT_NE(Error(g).find("positional_embedding is a learned [L, D] table"),
            std::string::npos);
}

TEST(OnnxImportSequence, PickingAPositionIsRefused) {
  Graph g({4}, 17, kIds);
  onnx::NodeProto* first = g.Node("Gather", {Embedded(&g), g.Ints({0})});
  Int(first, "axis", 1);
  g.Output(first);
  EXPECT_NE(Error(g).find("picks from the activations"), std::string::npos);
}

TEST(OnnxImportSequence, ImageOperatorsAreRefusedOnTokens) {
  Graph g({4}, 17, kIds);
  g.Output(g.Node("Conv", {Embedded(&g), g.Init("w", {6, 6, 1})}));
  const std::string err = Error(g);
  EXPECT_NE(err.find("Conv on the [N, L, D] activations of a token model"),
            std::string::npos)
      << err;
}

TEST(OnnxImportSequence, TokenIdsAreOnePerPosition) {
  Graph g({2, 4}, 17, kIds);
  g.Output(g.Node("Gather", {g.Init("embed.weight", {10, 6}), "x"}));
  EXPECT_NE(Error(g).find("holds token ids of [2, 4]"), std::string::npos);
}

}  // namespace
}  // namespace cohort
