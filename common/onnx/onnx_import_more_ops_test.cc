// The importer's Softmax, PRelu and Resize / Upsample mappings
// (onnx_import_more_ops.cc) on small hand-built graphs in the forms
// torch.onnx.export writes, and one test per refusal. The round trip
// through PyTorch is tests/onnx_import_test.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_import.h"
#include "common/onnx/onnx_test_graph.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using onnx_test::Dims;
using onnx_test::Error;
using onnx_test::Graph;
using onnx_test::Int;
using onnx_test::Str;

// torch's nn.Upsample: Resize(x, "", Concat([1, 1], [k, k])).
onnx::NodeProto* Resize(Graph* g, float k, const std::string& mode,
                        const std::string& transform) {
  const std::string scales = g->Floats({1, 1, k, k});
  onnx::NodeProto* n = g->Node("Resize", {"x", "", scales});
  Str(n, "mode", mode);
  Str(n, "coordinate_transformation_mode", transform);
  if (mode == "nearest") Str(n, "nearest_mode", "floor");
  return n;
}

TEST(OnnxImportMoreOps, SoftmaxAlongTheChannelsIsASoftmaxLayer) {
  Graph g({3, 8, 8});
  onnx::NodeProto* n = g.Node("Softmax", {"x"});
  Int(n, "axis", 1);
  g.Output(n);
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->model.layers(0).has_softmax());
  EXPECT_EQ(m->output_shape, (Dims{3, 8, 8}));
  // Over flat features, opset 13's default (the last axis) is axis 1.
  Graph flat({10});
  flat.Output(flat.Node("Softmax", {"x"}));
  m = ImportOnnx(flat.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->model.layers(0).has_softmax());
}

TEST(OnnxImportMoreOps, RefusesSoftmaxAlongOtherAxes) {
  Graph g({3, 8, 8});
  g.Output(g.Node("Softmax", {"x"}));  // opset 13: the last axis
  EXPECT_EQ(Error(g),
            "node /Softmax_1 (Softmax): a softmax along axis -1 of samples of "
            "[3, 8, 8]; cohort's softmax is nn.Softmax(dim=1), along the "
            "channels");
  Graph old({3, 8, 8}, 11);
  onnx::NodeProto* n = old.Node("Softmax", {"x"});
  Int(n, "axis", 1);
  old.Output(n);
  EXPECT_NE(Error(old).find("opset 11's Softmax normalises all of a sample's "
                            "[3, 8, 8] at once"),
            std::string::npos);
}

TEST(OnnxImportMoreOps, UnsqueezedPreluSlopeIsOnePerChannel) {
  Graph g({3, 8, 8});
  const std::string w = g.Init("act.weight", {3});
  const std::string axes = g.Ints({1, 2});
  onnx::NodeProto* u = g.Node("Unsqueeze", {w, axes});
  g.Output(g.Node("PRelu", {"x", u->output(0)}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.layers(0).prelu().num_parameters(), 3);
  ASSERT_EQ(m->weights.size(), 1u);
  EXPECT_EQ(m->weights[0].shape, (Dims{3}));
  EXPECT_NE(m->weights[0].name.find("weight"), std::string::npos);
}

TEST(OnnxImportMoreOps, PreluTakesOneSharedSlopeAndFlatFeatures) {
  Graph shared({4, 5});
  shared.Output(shared.Node("PRelu", {"x", shared.Init("p.weight", {1})}));
  absl::StatusOr<ImportedModel> m = ImportOnnx(shared.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.layers(0).prelu().num_parameters(), 1);
  EXPECT_EQ(m->weights[0].shape, (Dims{1}));
  Graph flat({6});
  flat.Output(flat.Node("PRelu", {"x", flat.Init("p.weight", {6})}));
  m = ImportOnnx(flat.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.layers(0).prelu().num_parameters(), 6);
}

TEST(OnnxImportMoreOps, RefusesSlopesThatMissTheChannels) {
  // [3] against [N, 3, 8, 8] lines up with the width, not the channels.
  Graph g({3, 8, 8});
  g.Output(g.Node("PRelu", {"x", g.Init("p.weight", {3})}));
  EXPECT_EQ(Error(g),
            "node /PRelu_1 (PRelu): slope [3] against samples of [3, 8, 8]; "
            "cohort's prelu takes one slope or one per channel "
            "(nn.PReLU(num_parameters=C))");
}

TEST(OnnxImportMoreOps, TorchsUpsampleBecomesAnUpsampleLayer) {
  Graph g({2, 4, 5});
  onnx::NodeProto* nearest = Resize(&g, 2, "nearest", "asymmetric");
  const std::string scales = g.Floats({1, 1, 3, 3});
  onnx::NodeProto* linear = g.Node("Resize", {nearest->output(0), "", scales});
  Str(linear, "mode", "linear");
  Str(linear, "coordinate_transformation_mode", "half_pixel");
  g.Output(linear);
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->model.layers_size(), 2);
  EXPECT_EQ(m->model.layers(0).upsample().scale(), 2);
  EXPECT_EQ(m->model.layers(0).upsample().mode(), UpsampleSpec::NEAREST);
  EXPECT_EQ(m->model.layers(1).upsample().scale(), 3);
  EXPECT_EQ(m->model.layers(1).upsample().mode(), UpsampleSpec::BILINEAR);
  EXPECT_EQ(m->output_shape, (Dims{2, 24, 30}));
}

TEST(OnnxImportMoreOps, RefusesOtherResizes) {
  Graph fraction({2, 4, 4});
  fraction.Output(Resize(&fraction, 1.5f, "nearest", "asymmetric"));
  EXPECT_NE(Error(fraction).find("(Resize): scales [1, 1, 1.5, 1.5]; cohort's "
                                 "upsample takes one integer factor"),
            std::string::npos);
  Graph corners({2, 4, 4});
  corners.Output(Resize(&corners, 2, "linear", "align_corners"));
  EXPECT_NE(Error(corners).find("mode linear with align_corners coordinates, "
                                "align_corners; cohort's upsample is"),
            std::string::npos);
  Graph cubic({2, 4, 4});
  cubic.Output(Resize(&cubic, 2, "cubic", "half_pixel"));
  EXPECT_NE(Error(cubic).find("mode cubic"), std::string::npos);
  Graph uneven({2, 4, 4});
  const std::string scales = uneven.Floats({1, 1, 2, 3});
  uneven.Output(uneven.Node("Resize", {"x", "", scales}));
  EXPECT_NE(Error(uneven).find("scales [1, 1, 2, 3]"), std::string::npos);
  Graph flat({16});
  flat.Output(Resize(&flat, 2, "nearest", "asymmetric"));
  EXPECT_NE(Error(flat).find("resizes samples of [16]; cohort's upsample "
                             "takes [C, H, W]"),
            std::string::npos);
}

TEST(OnnxImportMoreOps, OldUpsampleIsNearestOnly) {
  Graph g({2, 4, 4}, 9);
  onnx::NodeProto* n = g.Node("Upsample", {"x", g.Floats({1, 1, 2, 2})});
  Str(n, "mode", "nearest");
  g.Output(n);
  absl::StatusOr<ImportedModel> m = ImportOnnx(g.model(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.layers(0).upsample().scale(), 2);
  Graph linear({2, 4, 4}, 9);
  onnx::NodeProto* l =
      linear.Node("Upsample", {"x", linear.Floats({1, 1, 2, 2})});
  Str(l, "mode", "linear");
  linear.Output(l);
  EXPECT_NE(Error(linear).find("asymmetric coordinates"), std::string::npos);
}

}  // namespace
}  // namespace cohort
