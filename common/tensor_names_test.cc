#include "common/tensor_names.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

std::vector<LayerSpec> Layers(const std::string& text) {
  ModelSpec m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m));
  return {m.layers().begin(), m.layers().end()};
}

TEST(TensorNames, NamedLayersLendTheirNamesUnnamedKeepPositions) {
  const TensorNames names(Layers(R"(
    layers { conv2d { out_channels: 8 kernel: 3 } name: "conv1" }
    layers { relu {} }
    layers { branch {
      paths { layers { conv2d { out_channels: 8 kernel: 3 } name: "layer1.0.conv1" }
              layers { batchnorm2d {} name: "layer1.0.bn1" }
              layers { batchnorm2d {} } }
      paths { }
      combine: SUM } name: "layer1.0" }
    layers { linear { out_features: 10 } })"));
  EXPECT_EQ(names.Of("0.weight"), "conv1.weight");
  EXPECT_EQ(names.Of("2.paths.0.0.weight"), "layer1.0.conv1.weight");
  EXPECT_EQ(names.Of("2.paths.0.1.running_var"), "layer1.0.bn1.running_var");
  // An unnamed layer inside a named one: under the outer name.
  EXPECT_EQ(names.Of("2.paths.0.2.bias"), "layer1.0.paths.0.2.bias");
  EXPECT_EQ(names.Of("3.weight"), "3.weight");
  EXPECT_FALSE(names.empty());
  EXPECT_TRUE(TensorNames(Layers("layers { relu {} }")).empty());
}

TEST(TensorNames, SingleTensorsTakeTheirOwnNames) {
  const TensorNames names(Layers(R"(
    layers { attention { heads: 2 }
             tensor_names { key: "in_proj_weight" value: "h.0.attn.c_attn.weight" }
             tensor_names { key: "out_proj.bias" value: "h.0.attn.c_proj.bias" } }
    layers { attention { heads: 2 } name: "blk"
             tensor_names { key: "in_proj_bias" value: "qkv.bias" } })"));
  EXPECT_EQ(names.Of("0.in_proj_weight"), "h.0.attn.c_attn.weight");
  EXPECT_EQ(names.Of("0.out_proj.bias"), "h.0.attn.c_proj.bias");
  // Not listed, and the layer has no name: its position.
  EXPECT_EQ(names.Of("0.in_proj_bias"), "0.in_proj_bias");
  EXPECT_EQ(names.Of("1.in_proj_bias"), "qkv.bias");
  EXPECT_EQ(names.Of("1.out_proj.weight"), "blk.out_proj.weight");

  LayerSpec bad;
  (*bad.mutable_tensor_names())["in_proj_weight"] = "a/b";
  EXPECT_NE(CheckTensorNames(bad).message().find("in_proj_weight"),
            std::string::npos);
  (*bad.mutable_tensor_names())["in_proj_weight"] = "c_attn.weight";
  EXPECT_TRUE(CheckTensorNames(bad).ok());
}

TEST(TensorNames, LayerNamesAreModulePaths) {
  EXPECT_TRUE(CheckLayerName("features.3.conv.1.0").ok());
  EXPECT_TRUE(CheckLayerName("fc_2").ok());
  EXPECT_FALSE(CheckLayerName("").ok());
  EXPECT_FALSE(CheckLayerName(".fc").ok());
  EXPECT_FALSE(CheckLayerName("fc.").ok());
  EXPECT_FALSE(CheckLayerName("a..b").ok());
  EXPECT_FALSE(CheckLayerName("a/b").ok());
  EXPECT_FALSE(CheckLayerName("a b").ok());
}

TEST(TensorNames, FindsANameGivenTwice) {
  ModelSpec m;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"(layers { relu {} name: "a" }
         layers { branch { paths { layers { relu {} name: "b" } } } }
         layers { branch { paths { layers { relu {} name: "b" } } } })",
      &m));
  EXPECT_EQ(DuplicateLayerName(m.layers()), "b");
  m.mutable_layers()->RemoveLast();
  EXPECT_EQ(DuplicateLayerName(m.layers()), "");
}

}  // namespace
}  // namespace cohort
