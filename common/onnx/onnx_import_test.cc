// The ONNX importer on small hand-built graphs: the layers and weight
// names it makes, and one test per refusal.
#include "common/onnx/onnx_import.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/onnx/onnx_test_graph.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using onnx_test::Dims;
using onnx_test::Error;
using onnx_test::Float;
using onnx_test::Graph;
using onnx_test::Int;
using onnx_test::Ints;
using onnx_test::Str;

// A 3x3 convolution with padding 1 and a bias.
std::string Conv(Graph* g, const std::string& x, int in, int out,
                 const std::string& name) {
  onnx::NodeProto* n =
      g->Node("Conv", {x, g->Init(name + ".weight", {out, in, 3, 3}),
                       g->Init(name + ".bias", {out})});
  Ints(n, "kernel_shape", {3, 3});
  Ints(n, "pads", {1, 1, 1, 1});
  Ints(n, "strides", {1, 1});
  return n->output(0);
}

std::string BatchNorm(Graph* g, const std::string& x, int c,
                      const std::string& name) {
  onnx::NodeProto* n =
      g->Node("BatchNormalization",
              {x, g->Init(name + ".weight", {c}), g->Init(name + ".bias", {c}),
               g->Init(name + ".running_mean", {c}),
               g->Init(name + ".running_var", {c})},
              3);
  Float(n, "momentum", 0.9f);
  Float(n, "epsilon", 1e-5f);
  return n->output(0);
}

std::vector<std::string> Names(const ImportedModel& m) {
  std::vector<std::string> out;
  for (const SafeTensor& t : m.weights) out.push_back(t.name);
  return out;
}

TEST(OnnxImport, SmallCnnBecomesLayersUnderTheModulesNames) {
  Graph g({3, 8, 8});
  std::string h = BatchNorm(&g, Conv(&g, "x", 3, 4, "c"), 4, "b");
  h = g.Op("Relu", {h});
  onnx::NodeProto* pool = g.Node("MaxPool", {h});
  Ints(pool, "kernel_shape", {2, 2});
  Ints(pool, "strides", {2, 2});
  onnx::NodeProto* flat = g.Node("Flatten", {pool->output(0)});
  Int(flat, "axis", 1);
  onnx::NodeProto* fc =
      g.Node("Gemm", {flat->output(0), g.Init("fc.weight", {10, 64}),
                      g.Init("fc.bias", {10})});
  Int(fc, "transB", 1);
  onnx::NodeProto* drop =
      g.Node("Dropout", {fc->output(0), g.Scalar(0.25f)}, 2);
  g.Output(drop->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 7);
  EXPECT_EQ(m->model.layers(0).conv2d().out_channels(), 4);
  EXPECT_EQ(m->model.layers(0).conv2d().padding(), 1);
  EXPECT_NEAR(m->model.layers(1).batchnorm2d().momentum(), 0.1f, 1e-7);
  EXPECT_TRUE(m->model.layers(2).has_relu());
  EXPECT_EQ(m->model.layers(3).maxpool2d().kernel(), 2);
  EXPECT_TRUE(m->model.layers(4).has_flatten());
  EXPECT_EQ(m->model.layers(5).linear().out_features(), 10);
  EXPECT_FLOAT_EQ(m->model.layers(6).dropout().p(), 0.25f);
  // Each layer is named after the module its initializers name.
  EXPECT_EQ(m->model.layers(0).name(), "c");
  EXPECT_EQ(m->model.layers(1).name(), "b");
  EXPECT_EQ(m->model.layers(2).name(), "");
  EXPECT_EQ(m->model.layers(5).name(), "fc");
  EXPECT_EQ(Names(*m),
            (std::vector<std::string>{
                "c.weight", "c.bias", "b.weight", "b.bias", "b.running_mean",
                "b.running_var", "fc.weight", "fc.bias"}));
  EXPECT_EQ(m->output_shape, Dims{10});
  const std::string text = ImportedJobText(*m, "dir/small.onnx", "w.st");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "small.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << text;
  EXPECT_EQ(spec->name(), "small");
  EXPECT_EQ(spec->data().synthetic().classes(), 10);
}

TEST(OnnxImport, LayersWhoseInitializersNameNoModuleKeepTheirPositions) {
  Graph g({3, 4});
  onnx::NodeProto* fc = g.Node(
      "Gemm", {"x", g.Init("onnx::Gemm_7", {5, 12}), g.Init("head.bias", {5})});
  Int(fc, "transB", 1);
  onnx::NodeProto* flat = g.Node("Flatten", {"x"});
  Int(flat, "axis", 1);
  fc->set_input(0, flat->output(0));
  g.Output(fc->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 2);
  EXPECT_EQ(m->model.layers(1).name(), "");
  EXPECT_EQ(Names(*m), (std::vector<std::string>{"1.weight", "1.bias"}));
}

TEST(OnnxImport, ResidualAddBecomesSumBranchWithAnEmptyPath) {
  Graph g({4, 6, 6});
  const std::string body = g.Op("Relu", {Conv(&g, "x", 4, 4, "c")});
  g.Output(g.Op("Relu", {g.Op("Add", {body, "x"})}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 2);
  const BranchSpec& b = m->model.layers(0).branch();
  EXPECT_EQ(b.combine(), BranchSpec::SUM);
  ASSERT_EQ(b.paths_size(), 2);
  EXPECT_EQ(b.paths(0).layers_size(), 2);
  EXPECT_EQ(b.paths(1).layers_size(), 0);
  EXPECT_TRUE(m->model.layers(1).has_relu());
  EXPECT_EQ(Names(*m), (std::vector<std::string>{"c.weight", "c.bias"}));
}

// A bias-free convolution, as torchvision's ResNets have them.
std::string ResNetConv(Graph* g, const std::string& x, int in, int out,
                       int kernel, int stride, const std::string& name) {
  onnx::NodeProto* n = g->Node(
      "Conv", {x, g->Init(name + ".weight", {out, in, kernel, kernel})});
  const int pad = kernel / 2;
  Ints(n, "kernel_shape", {kernel, kernel});
  Ints(n, "pads", {pad, pad, pad, pad});
  Ints(n, "strides", {stride, stride});
  return n->output(0);
}

// torchvision's BasicBlock under module name `name`: a projection shortcut
// when the stride or the width changes.
std::string BasicBlockGraph(Graph* g, const std::string& x, int in, int out,
                            int stride, const std::string& name) {
  std::string h = ResNetConv(g, x, in, out, 3, stride, name + ".conv1");
  h = g->Op("Relu", {BatchNorm(g, h, out, name + ".bn1")});
  h = BatchNorm(g, ResNetConv(g, h, out, out, 3, 1, name + ".conv2"), out,
                name + ".bn2");
  std::string shortcut = x;
  if (stride != 1 || in != out) {
    shortcut = BatchNorm(
        g, ResNetConv(g, x, in, out, 1, stride, name + ".downsample.0"), out,
        name + ".downsample.1");
  }
  return g->Op("Relu", {g->Op("Add", {h, shortcut})});
}

TEST(OnnxImport, TorchvisionBasicBlocksBecomeResidualLayersUnderTheirNames) {
  Graph g({3, 6, 6});
  const std::string stem = ResNetConv(&g, "x", 3, 8, 3, 1, "conv1");
  const std::string a = BasicBlockGraph(&g, stem, 8, 8, 1, "layer1.0");
  g.Output(BasicBlockGraph(&g, a, 8, 16, 2, "layer2.0"));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 3);
  m->model.mutable_layers()->DeleteSubrange(0, 1);  // the stem
  m->weights.erase(m->weights.begin());
  const ResidualSpec& first = m->model.layers(0).residual();
  EXPECT_EQ(first.out_channels(), 8);
  EXPECT_EQ(first.stride(), 1);
  EXPECT_FALSE(first.bottleneck());
  EXPECT_EQ(m->model.layers(0).name(), "layer1.0");
  EXPECT_EQ(m->model.layers(1).residual().out_channels(), 16);
  EXPECT_EQ(m->model.layers(1).residual().stride(), 2);
  EXPECT_EQ(m->model.layers(1).name(), "layer2.0");
  EXPECT_TRUE(m->model.layers(1).tensor_names().empty());
  const std::vector<std::string> names = Names(*m);
  ASSERT_EQ(names.size(), 25u);
  EXPECT_EQ(names[0], "layer1.0.conv1.weight");
  EXPECT_EQ(names[5], "layer1.0.conv2.weight");
  EXPECT_EQ(names[20], "layer2.0.downsample.0.weight");
  EXPECT_EQ(names[24], "layer2.0.downsample.1.running_var");
  const std::string text = ImportedJobText(*m, "r.onnx", "w.st");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "r.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status() << "\n" << text;
}

TEST(OnnxImport, BottleneckBecomesResidualLayerAndKeepsOddNamesPerTensor) {
  Graph g({3, 4, 4});
  const std::string stem = ResNetConv(&g, "x", 3, 16, 3, 1, "stem");
  std::string h = ResNetConv(&g, stem, 16, 8, 1, 1, "m.c1");
  h = g.Op("Relu", {BatchNorm(&g, h, 8, "m.b1")});
  h = g.Op("Relu",
           {BatchNorm(&g, ResNetConv(&g, h, 8, 8, 3, 2, "m.c2"), 8, "m.b2")});
  h = BatchNorm(&g, ResNetConv(&g, h, 8, 32, 1, 1, "m.c3"), 32, "m.b3");
  const std::string s =
      BatchNorm(&g, ResNetConv(&g, stem, 16, 32, 1, 2, "m.d0"), 32, "m.d1");
  g.Output(g.Op("Relu", {g.Op("Add", {h, s})}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 2);
  const LayerSpec& l = m->model.layers(1);
  EXPECT_TRUE(l.residual().bottleneck());
  EXPECT_EQ(l.residual().out_channels(), 32);
  EXPECT_EQ(l.residual().stride(), 2);
  // No common prefix: each tensor keeps its own name.
  EXPECT_EQ(l.name(), "");
  EXPECT_EQ(l.tensor_names().at("conv2.weight"), "m.c2.weight");
  EXPECT_EQ(l.tensor_names().at("downsample.1.running_mean"),
            "m.d1.running_mean");
  EXPECT_EQ(Names(*m)[1], "m.c1.weight");
  EXPECT_EQ(Names(*m).back(), "m.d1.running_var");
  const std::string text = ImportedJobText(*m, "b.onnx", "w.st");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "b.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status() << "\n" << text;
}

// A stem convolution, then a BasicBlock of 4 channels ("b") altered by
// `change`: "bias" (a bias on conv1), "projection" (a downsample where the
// shape does not change), "strided" (stride 2 with the width kept), "no
// relu" (none after the sum) or "" (none).
absl::StatusOr<ImportedModel> ImportAlteredBlock(const std::string& change) {
  Graph g({3, 6, 6});
  const std::string x = ResNetConv(&g, "x", 3, 4, 3, 1, "stem");
  const int stride = change == "strided" ? 2 : 1;
  std::string h = change == "bias"
                      ? Conv(&g, x, 4, 4, "b.conv1")
                      : ResNetConv(&g, x, 4, 4, 3, stride, "b.conv1");
  h = g.Op("Relu", {BatchNorm(&g, h, 4, "b.bn1")});
  h = BatchNorm(&g, ResNetConv(&g, h, 4, 4, 3, 1, "b.conv2"), 4, "b.bn2");
  std::string shortcut = x;
  if (change == "projection" || change == "strided") {
    shortcut =
        BatchNorm(&g, ResNetConv(&g, x, 4, 4, 1, stride, "b.downsample.0"), 4,
                  "b.downsample.1");
  }
  const std::string sum = g.Op("Add", {h, shortcut});
  g.Output(change == "no relu" ? sum : g.Op("Relu", {sum}));
  return ImportOnnx(g.model(), {});
}

TEST(OnnxImport, BlocksThatAreNotTorchvisionsStayBranches) {
  absl::StatusOr<ImportedModel> exact = ImportAlteredBlock("");
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_EQ(exact->model.layers_size(), 2);
  EXPECT_TRUE(exact->model.layers(1).has_residual());
  EXPECT_EQ(exact->model.layers(1).name(), "b");
  for (const char* change : {"bias", "projection", "strided", "no relu"}) {
    absl::StatusOr<ImportedModel> m = ImportAlteredBlock(change);
    ASSERT_TRUE(m.ok()) << change << ": " << m.status();
    ASSERT_GE(m->model.layers_size(), 2) << change;
    EXPECT_TRUE(m->model.layers(1).has_branch()) << change;
    EXPECT_EQ(Names(*m)[1], "b.conv1.weight") << change;
  }
}

TEST(OnnxImport, ConcatOfTwoPathsBecomesConcatBranch) {
  Graph g({3, 6, 6});
  const std::string a = Conv(&g, "x", 3, 2, "a");
  const std::string b = g.Op("Relu", {Conv(&g, "x", 3, 5, "b")});
  onnx::NodeProto* cat = g.Node("Concat", {a, b});
  Int(cat, "axis", 1);
  g.Output(cat->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.layers(0).branch().combine(), BranchSpec::CONCAT);
  EXPECT_EQ(m->output_shape, (Dims{7, 6, 6}));
  EXPECT_EQ(Names(*m)[2], "b.weight");
  EXPECT_EQ(m->model.layers(0).branch().paths(1).layers(0).name(), "b");
}

TEST(OnnxImport, SiluGeluAndTorchsFlattenArithmeticAreFolded) {
  Graph g({2, 3, 3});
  const std::string x = "x";
  const std::string silu = g.Op("Mul", {x, g.Op("Sigmoid", {x})});
  const std::string erf =
      g.Op("Erf", {g.Op("Div", {silu, g.Scalar(1.4142135f)})});
  const std::string one = g.Op("Add", {erf, g.Scalar(1)});
  const std::string gelu =
      g.Op("Mul", {g.Op("Mul", {silu, one}), g.Scalar(0.5f)});
  // x.view(x.size(0), -1)
  const std::string n =
      g.Op("Unsqueeze",
           {g.Op("Gather", {g.Op("Shape", {gelu}), g.Ints({0})}), g.Ints({0})});
  const std::string shape = g.Op("Concat", {n, g.Ints({-1})});
  Int(g.Node("Identity", {}), "unused", 0);  // a stray node is ignored
  const std::string flat = g.Op("Reshape", {gelu, shape});
  const std::string mm =
      g.Op("MatMul",
           {flat, g.Op("Transpose", {g.Init("fc.weight", {4, 18}, 0.01f)})});
  g.Output(g.Op("Add", {mm, g.Init("fc.bias", {4})}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 4);
  EXPECT_TRUE(m->model.layers(0).has_silu());
  EXPECT_TRUE(m->model.layers(1).has_gelu());
  EXPECT_TRUE(m->model.layers(2).has_flatten());
  EXPECT_FALSE(m->model.layers(3).linear().no_bias());
  // fc.weight went through Transpose twice: its values are as stored.
  float first[2];
  std::memcpy(first, m->weights[0].bytes.data(), sizeof(first));
  EXPECT_FLOAT_EQ(first[0], 0.01f);
  EXPECT_FLOAT_EQ(first[1], 0.02f);
}

TEST(OnnxImport, GlobalPoolAndFlattenBecomeGlobalAvgpool) {
  Graph g({3, 4, 4});
  onnx::NodeProto* f = g.Node("Flatten", {g.Op("GlobalAveragePool", {"x"})});
  Int(f, "axis", 1);
  g.Output(f->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 1);
  EXPECT_TRUE(m->model.layers(0).has_global_avgpool());
  EXPECT_EQ(m->output_shape, Dims{3});
}

TEST(OnnxImport, ZeroPadBeforeAvgPoolBecomesItsPadding) {
  Graph g({3, 8, 8});
  const std::string padded =
      g.Op("Pad", {"x", g.Ints({0, 0, 1, 1, 0, 0, 1, 1})});
  onnx::NodeProto* p = g.Node("AveragePool", {padded});
  Ints(p, "kernel_shape", {3, 3});
  Ints(p, "strides", {2, 2});
  g.Output(p->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.layers(0).avgpool2d().padding(), 1);
  EXPECT_EQ(m->output_shape, (Dims{3, 4, 4}));
}

// A Conv of weight `w` ([OC, C, KH, KW]) with `attrs` set on it.
std::string ConvWith(Graph* g, const std::string& x, const Dims& w,
                     const std::vector<std::pair<std::string, Dims>>& attrs) {
  onnx::NodeProto* n = g->Node("Conv", {x, g->Init("w" + x, w)});
  for (const auto& [name, v] : attrs) Ints(n, name, v);
  return n->output(0);
}

TEST(OnnxImport, RectangularWindowsAndSamePadding) {
  Graph g({3, 8, 9});
  std::string y = ConvWith(&g, "x", {4, 3, 1, 7}, {{"pads", {0, 3, 0, 3}}});
  y = ConvWith(&g, y, {4, 4, 7, 1}, {{"pads", {3, 0, 3, 0}}});
  y = ConvWith(&g, y, {4, 4, 3, 3},
               {{"strides", {2, 1}}, {"pads", {1, 1, 1, 1}}});
  // An even kernel padded as PyTorch's padding="same": the odd zero after.
  y = ConvWith(&g, y, {4, 4, 4, 2}, {{"pads", {1, 0, 2, 1}}});
  onnx::NodeProto* upper = g.Node("Conv", {y, g.Init("wu", {4, 4, 2, 3})});
  Str(upper, "auto_pad", "SAME_UPPER");
  g.Output(upper->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 5);
  const ConvSpec& c0 = m->model.layers(0).conv2d();
  EXPECT_THAT(c0.kernel_hw(), ::testing::ElementsAre(1, 7));
  EXPECT_THAT(c0.padding_hw(), ::testing::ElementsAre(0, 3));
  EXPECT_EQ(c0.kernel(), 0);
  const ConvSpec& c2 = m->model.layers(2).conv2d();
  EXPECT_EQ(c2.kernel(), 3);
  EXPECT_THAT(c2.stride_hw(), ::testing::ElementsAre(2, 1));
  EXPECT_EQ(c2.padding(), 1);
  EXPECT_EQ(m->model.layers(3).conv2d().padding_mode(), ConvSpec::SAME);
  EXPECT_EQ(m->model.layers(4).conv2d().padding_mode(), ConvSpec::SAME);
  EXPECT_EQ(m->output_shape, (Dims{4, 4, 9}));
  // The written spec carries the fields and reads back.
  const std::string text = ImportedJobText(*m, "m.onnx", "");
  EXPECT_NE(text.find("kernel_hw: 1 kernel_hw: 7"), std::string::npos) << text;
  EXPECT_NE(text.find("padding_mode: SAME"), std::string::npos) << text;
  const absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "job.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
}

TEST(OnnxImport, RefusesPadsThatAreNotSame) {
  Graph g({3, 8, 8});
  onnx::NodeProto* n = g.Node("Conv", {"x", g.Init("w", {4, 3, 3, 3})});
  n->set_name("/layer1/Conv_3");
  Ints(n, "pads", {0, 0, 1, 1});
  g.Output(n->output(0));
  EXPECT_EQ(Error(g),
            "node /layer1/Conv_3 (Conv): pads [0, 0] before and [1, 1] after "
            "differ; cohort's conv2d pads both sides of a dim alike, or as "
            "PyTorch's padding=\"same\" (stride 1, the odd zero after)");
  // SAME's padding with a stride, and the odd zero before.
  Graph h({3, 8, 8});
  h.Output(ConvWith(&h, "x", {4, 3, 4, 4},
                    {{"pads", {1, 1, 2, 2}}, {"strides", {2, 2}}}));
  EXPECT_NE(Error(h).find("differ"), std::string::npos);
  Graph k({3, 8, 8});
  k.Output(ConvWith(&k, "x", {4, 3, 4, 4}, {{"pads", {2, 2, 1, 1}}}));
  EXPECT_NE(Error(k).find("differ"), std::string::npos);
  Graph one_d({3, 8});
  one_d.Output(ConvWith(&one_d, "x", {4, 3, 4}, {{"pads", {1, 2}}}));
  EXPECT_NE(Error(one_d).find("cohort's conv1d pads both sides alike"),
            std::string::npos);
}

TEST(OnnxImport, ConvTransposeBecomesConvTranspose2d) {
  Graph g({4, 5, 6});
  onnx::NodeProto* n =
      g.Node("ConvTranspose",
             {"x", g.Init("up.weight", {4, 3, 3, 3}), g.Init("up.bias", {6})});
  Ints(n, "kernel_shape", {3, 3});
  Ints(n, "strides", {2, 2});
  Ints(n, "pads", {1, 1, 1, 1});
  Ints(n, "output_padding", {1, 1});
  Int(n, "group", 2);
  g.Output(n->output(0));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  const ConvTransposeSpec& c = m->model.layers(0).conv_transpose2d();
  EXPECT_EQ(c.out_channels(), 6);
  EXPECT_EQ(c.kernel(), 3);
  EXPECT_EQ(c.stride(), 2);
  EXPECT_EQ(c.padding(), 1);
  EXPECT_EQ(c.output_padding(), 1);
  EXPECT_EQ(c.groups(), 2);
  EXPECT_FALSE(c.no_bias());
  EXPECT_EQ(m->output_shape, (Dims{6, 10, 12}));
  ASSERT_EQ(m->weights.size(), 2u);
  EXPECT_EQ(m->weights[0].shape, (Dims{4, 3, 3, 3}));

  Graph rect({4, 5, 6});
  onnx::NodeProto* r =
      rect.Node("ConvTranspose", {"x", rect.Init("w", {4, 3, 1, 3})});
  rect.Output(r->output(0));
  EXPECT_NE(Error(rect).find("cohort's conv_transpose2d takes a square "
                             "kernel"),
            std::string::npos);
}

TEST(OnnxImport, RefusesUnsupportedOperatorsNamingThem) {
  Graph g({3, 8, 8});
  g.Output(g.Op("GridSample", {"x"}));
  const std::string e = Error(g);
  EXPECT_NE(e.find("(GridSample): cohort has no layer for ONNX's GridSample"),
            std::string::npos)
      << e;
}

TEST(OnnxImport, RefusesAsymmetricPadsAndExcludedPadding) {
  Graph g({3, 8, 8});
  onnx::NodeProto* p = g.Node("AveragePool", {"x"});
  Ints(p, "kernel_shape", {3, 3});
  Ints(p, "pads", {1, 1, 1, 1});
  g.Output(p->output(0));
  EXPECT_NE(Error(g).find("count_include_pad=False"), std::string::npos);
  Graph h({3, 8, 8});
  onnx::NodeProto* q = h.Node("MaxPool", {"x"});
  Ints(q, "kernel_shape", {3, 3});
  Ints(q, "pads", {0, 0, 1, 1});
  h.Output(q->output(0));
  EXPECT_NE(Error(h).find("pads [0, 0, 1, 1] differ between sides"),
            std::string::npos);
}

TEST(OnnxImport, RefusesMalformedGraphs) {
  Graph unknown({4});
  unknown.Output(unknown.Op("Relu", {"nowhere"}));
  EXPECT_NE(Error(unknown).find("reads nowhere, which is neither"),
            std::string::npos);

  Graph cycle({4});
  onnx::NodeProto* a = cycle.Node("Add", {"x", "x"});
  onnx::NodeProto* r = cycle.Node("Relu", {a->output(0)});
  a->set_input(1, r->output(0));
  cycle.Output(r);
  EXPECT_NE(Error(cycle).find("lies on a cycle"), std::string::npos);

  Graph missing({3, 4, 4});
  missing.Output(missing.Op("Conv", {"x", ""}));
  EXPECT_NE(Error(missing).find("input #1 is missing"), std::string::npos);

  absl::StatusOr<ImportedModel> junk = ImportOnnxBytes("\xff\xff junk", {});
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kDataLoss);
}

TEST(OnnxImport, RefusesGraphsThatAreNotSeriesParallel) {
  Graph g({4});
  const std::string a = g.Op("Relu", {"x"});
  const std::string b = g.Op("Sigmoid", {a});
  const std::string s = g.Op("Add", {"x", b});
  g.Output(g.Op("Add", {s, a}));  // reads `a` from inside the first block
  EXPECT_NE(Error(g).find("series-parallel"), std::string::npos);
}

TEST(OnnxImport, SymbolicDimsNeedInputShape) {
  Graph g({3, 8, 8});
  g.Output(g.Op("Relu", {"x"}));
  onnx::ModelProto model = g.model();
  model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(2)
      ->set_dim_param("height");
  absl::StatusOr<ImportedModel> m = ImportOnnx(model, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("--input-shape"),
            absl::string_view::npos);
  OnnxImportOptions o;
  o.input_shape = {3, 8, 8};
  m = ImportOnnx(model, o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->output_shape, (Dims{3, 8, 8}));
}

TEST(OnnxImport, ClipZeroSixIsRelu6) {
  Graph g({4});
  g.Output(g.Op("Clip", {"x", g.Scalar(0), g.Scalar(6)}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->model.layers(0).has_relu6());
  Graph h({4});
  h.Output(h.Op("Clip", {"x", h.Scalar(-1), h.Scalar(1)}));
  EXPECT_NE(Error(h).find("clips to [-1, 1]"), std::string::npos);
}

}  // namespace
}  // namespace cohort
