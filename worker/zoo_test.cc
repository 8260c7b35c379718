#include "worker/zoo.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/loss.h"

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
  // torchvision.models.resnet50(): BN weights and biases are parameters,
  // running statistics buffers.
  EXPECT_EQ(Params("resnet50"), 25557032);
}

TEST(Zoo, OutputsHaveTheirClassCount) {
  for (const std::string& name : ZooModelNames()) {
    if (name == "conv1d_bn") continue;
    ModelSpec spec;
    spec.set_zoo(name);
    auto model = BuildModel<float>(spec, *ZooInputShape(name), 1);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    EXPECT_EQ((*model)->output_shape(), Shape({name == "resnet50" ? 1000 : 10}))
        << name;
  }
}

TEST(Zoo, Resnet50HasTorchvisionsLayout) {
  ModelSpec spec;
  spec.set_zoo("resnet50");
  auto model = BuildModel<float>(spec, {3, 224, 224}, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<ParamStore<float>::Entry>& e =
      (*model)->param_store().entries();
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front().shape, Shape({64, 3, 7, 7}));
  EXPECT_EQ(e.back().shape, Shape({1000}));
  EXPECT_EQ(e[e.size() - 2].shape, Shape({1000, 2048}));
  // 1 stem conv + 3 per block + 4 downsample convs (a weight each), each
  // followed by a BN (weight and bias), + fc weight and bias: torchvision's
  // 161 parameter tensors.
  EXPECT_EQ(e.size(), 3u * (1 + 3 * 16 + 4) + 2);
  // Running mean and variance of every BN.
  EXPECT_EQ((*model)->Buffers().size(), 2u * (1 + 3 * 16 + 4));
}

// The whole network trains on a small input (64x64: stages at 16, 8, 4 and
// 2 pixels) without the cost of 224x224.
TEST(Zoo, Resnet50ForwardBackwardIsFinite) {
  ModelSpec spec;
  spec.set_zoo("resnet50");
  auto model = BuildModel<float>(spec, {3, 64, 64}, 5);
  ASSERT_TRUE(model.ok()) << model.status();
  Tensor x({3, 2, 64, 64});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = (i % 23) * 0.1f - 1.1f;
  const Tensor& logits = (*model)->Forward(x, Mode::kTrain);
  ASSERT_EQ(logits.shape(), Shape({2, 1000}));
  Tensor grad;
  const std::vector<int32_t> labels = {3, 999};
  const float loss = SoftmaxCrossEntropy(logits, labels, &grad);
  // Near ln(1000) from PyTorch's initialisation.
  EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_GT(loss, 1.0f);
  EXPECT_LT(loss, 20.0f);
  (*model)->Backward(grad);
  const Tensor& g = (*model)->grads();
  for (int64_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g[i])) << "gradient " << i;
  }
  // The gradient reaches the stem through all 16 blocks.
  const ParamStore<float>::Entry& stem = (*model)->param_store().entries()[0];
  double stem_norm = 0;
  for (int64_t i = 0; i < NumElements(stem.shape); ++i) {
    stem_norm += std::abs(g[stem.offset + i]);
  }
  EXPECT_GT(stem_norm, 0.0);
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
