// torchvision's names for the zoo's ResNets, and none for other models.
#include "worker/torchvision_names.h"

#include "common/zoo_specs.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

std::map<std::string, std::string> NamesOf(const std::string& zoo) {
  ModelSpec spec;
  spec.set_zoo(zoo);
  absl::StatusOr<std::vector<LayerSpec>> layers = LayerSpecs(spec);
  EXPECT_TRUE(layers.ok()) << layers.status();
  return layers.ok() ? TorchvisionLayerNames(*layers)
                     : std::map<std::string, std::string>();
}

TEST(TorchvisionNames, Resnet50HasTorchvisionsStagesAndBlocks) {
  const std::map<std::string, std::string> n = NamesOf("resnet50");
  // conv, bn, relu, max pool, 3 + 4 + 6 + 3 blocks, global pool, linear.
  EXPECT_EQ(n.size(), 2u + 16u + 1u);
  EXPECT_EQ(n.at("0"), "conv1");
  EXPECT_EQ(n.at("1"), "bn1");
  EXPECT_EQ(n.at("4"), "layer1.0");
  EXPECT_EQ(n.at("6"), "layer1.2");
  EXPECT_EQ(n.at("7"), "layer2.0");
  EXPECT_EQ(n.at("11"), "layer3.0");
  EXPECT_EQ(n.at("17"), "layer4.0");
  EXPECT_EQ(n.at("19"), "layer4.2");
  EXPECT_EQ(n.at("21"), "fc");
  EXPECT_EQ(TorchvisionName(n, "7.downsample.1.running_var"),
            "layer2.0.downsample.1.running_var");
  EXPECT_EQ(TorchvisionName(n, "21.bias"), "fc.bias");
  EXPECT_EQ(TorchvisionName(n, "20.weight"), "");  // no such layer name
  EXPECT_EQ(TorchvisionName(n, "weight"), "");
}

TEST(TorchvisionNames, Resnet18CifarStartsItsFirstStageAtTheStemsWidth) {
  const std::map<std::string, std::string> n = NamesOf("resnet18_cifar");
  EXPECT_EQ(n.at("3"), "layer1.0");  // 64 channels, as the stem
  EXPECT_EQ(n.at("4"), "layer1.1");
  EXPECT_EQ(n.at("5"), "layer2.0");
  EXPECT_EQ(n.at("10"), "layer4.1");
  EXPECT_EQ(n.at("12"), "fc");
}

TEST(TorchvisionNames, ModelsWithoutResidualBlocksKeepTheirOwnNames) {
  EXPECT_TRUE(NamesOf("lenet_cifar").empty());
  EXPECT_TRUE(NamesOf("mlp_seed").empty());
  EXPECT_TRUE(TorchvisionLayerNames({}).empty());
}

}  // namespace
}  // namespace cohort
