#include "worker/zoo.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

int64_t Params(const std::string& name) {
  ModelSpec spec;
  spec.set_zoo(name);
  absl::StatusOr<Shape> shape = ZooInputShape(name);
  EXPECT_TRUE(shape.ok());
  auto model = BuildModel<float>(spec, *shape, 1);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? (*model)->num_parameters() : -1;
}

// Parameter counts as PyTorch reports them for the same architectures.
TEST(Zoo, ParameterCountsMatchTheArchitectures) {
  EXPECT_EQ(Params("mlp_seed"), 100 * 200 + 200 + 200 * 10 + 10);
  EXPECT_EQ(Params("lenet_cifar"), 62006);
  EXPECT_EQ(Params("lenet5"), 61706);
  EXPECT_EQ(Params("conv1d_bn"), (3 * 16 * 3 + 16) + 2 * 16 +
                                     (16 * 32 * 3 + 32) + 2 * 32 +
                                     (32 * 3 * 3 + 3));
  EXPECT_EQ(Params("mlp_mnist"),
            784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  EXPECT_EQ(Params("resnet18_cifar"), 11173962);
}

TEST(Zoo, OutputsHaveTenClasses) {
  for (const std::string& name : ZooModelNames()) {
    if (name == "conv1d_bn") continue;
    ModelSpec spec;
    spec.set_zoo(name);
    auto model = BuildModel<float>(spec, *ZooInputShape(name), 1);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    EXPECT_EQ((*model)->output_shape(), Shape({10})) << name;
  }
}

TEST(Zoo, UnknownNameListsTheKnownOnes) {
  ModelSpec spec;
  spec.set_zoo("lenet9");
  auto layers = BuildLayers<float>(spec);
  ASSERT_FALSE(layers.ok());
  EXPECT_EQ(layers.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(layers.status().message().find("lenet9"), std::string::npos);
  EXPECT_NE(layers.status().message().find("resnet18_cifar"),
            std::string::npos);
}

TEST(Zoo, ForwardOfLenetGivesFiniteLogits) {
  ModelSpec spec;
  spec.set_zoo("lenet5");
  auto model = BuildModel<float>(spec, {1, 28, 28}, 3);
  ASSERT_TRUE(model.ok());
  Tensor x({1, 4, 28, 28});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = (i % 17) * 0.1f - 0.8f;
  const Tensor& y = (*model)->Forward(x, Mode::kEval);
  ASSERT_EQ(y.shape(), Shape({4, 10}));
  for (int64_t i = 0; i < y.size(); ++i) EXPECT_TRUE(std::isfinite(y[i]));
}

}  // namespace
}  // namespace cohort
