#include "worker/zoo.h"

#include <cmath>
#include <vector>

#include "common/model_sizes.h"
#include "google/protobuf/text_format.h"
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
  // sum(p.numel() for p in m.parameters()) of the PyTorch model: Conv2d(3,
  // 192, 16, stride=16), a [196, 192] positional parameter, 4
  // nn.TransformerEncoderLayer(192, 3, 768, norm_first=True), LayerNorm(192)
  // and Linear(192, 1000).
  EXPECT_EQ(Params("vit_tiny"), 2158120);
  // bench/ctr_torch.py's Dlrm: bottom 13-64-16, 26 EmbeddingBag(32768, 16),
  // top (16 + 27 * 26 / 2)-128-64-1.
  EXPECT_EQ(Params("dlrm_small"), (13 * 64 + 64) + (64 * 16 + 16) +
                                      26 * 32768 * 16 + (367 * 128 + 128) +
                                      (128 * 64 + 64) + (64 * 1 + 1));
}

TEST(Zoo, OutputsHaveTheirClassCount) {
  for (const std::string& name : ZooModelNames()) {
    if (name == "conv1d_bn" || name == "gpt_tiny") continue;
    ModelSpec spec;
    spec.set_zoo(name);
    auto model = BuildModel<float>(spec, *ZooInputShape(name), 1);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    const bool imagenet = name == "resnet50" || name == "vit_tiny";
    const int64_t classes = name == "dlrm_small" ? 1 : imagenet ? 1000 : 10;
    EXPECT_EQ((*model)->output_shape(), Shape({classes})) << name;
  }
}

// gpt_tiny's layers; built (its transformer blocks) by the merged engine.
TEST(Zoo, GptTinyIsATiedFourBlockLanguageModel) {
  ModelSpec spec;
  spec.set_zoo("gpt_tiny");
  absl::StatusOr<std::vector<LayerSpec>> layers = LayerSpecs(spec);
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 8u);
  EXPECT_EQ((*layers)[0].embedding().vocab_size(), 256);
  EXPECT_EQ((*layers)[0].embedding().dim(), 256);
  EXPECT_TRUE((*layers)[1].has_positional_embedding());
  for (int i = 2; i < 6; ++i) {
    EXPECT_EQ((*layers)[i].transformer_block().heads(), 4) << i;
  }
  EXPECT_TRUE((*layers)[6].layernorm().per_position());
  EXPECT_TRUE((*layers)[7].has_tied_lm_head());
  // Designed for windows of 256 bytes, it takes the data's context.
  EXPECT_EQ(*ZooInputShape("gpt_tiny"), (Shape{1, 256}));
  EXPECT_EQ(*ZooInputShape("gpt_tiny", {1, 64}), (Shape{1, 64}));
  EXPECT_EQ(*ZooInputShape("gpt_tiny", {3, 64}), (Shape{1, 256}));
  EXPECT_EQ(*ZooInputShape("lenet5", {1, 64}), (Shape{1, 28, 28}));
}

// The transformer block and its shape inference: GPT-2's layout at width
// 256, the head tied (no parameters).
TEST(Zoo, GptTinyParameterCount) {
  const int64_t d = 256, block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) +
                                 2 * d + (4 * d * d + 4 * d) + (4 * d * d + d);
  EXPECT_EQ(Params("gpt_tiny"), 256 * d + 256 * d + 4 * block + 2 * d);
}

// vit_tiny's layers and the tensors of its PyTorch counterpart, in order.
TEST(Zoo, VitTinyIsAPatchEncoderWithAMeanHead) {
  ModelSpec spec;
  spec.set_zoo("vit_tiny");
  auto model = BuildModel<float>(spec, *ZooInputShape("vit_tiny"), 1);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Shape> outputs = {
      {192, 14, 14}, {192, 196}, {192, 196}, {192, 196}, {192, 196},
      {192, 196},    {192, 196}, {192, 196}, {192},      {1000}};
  EXPECT_EQ((*model)->layer_outputs(), outputs);
  const std::vector<ParamStore<float>::Entry>& e =
      (*model)->param_store().entries();
  // patch weight and bias, the positions, 12 per block, norm, head.
  ASSERT_EQ(e.size(), 3u + 4 * 12 + 2 + 2);
  EXPECT_EQ(e[0].shape, Shape({192, 3, 16, 16}));
  EXPECT_EQ(e[2].shape, Shape({196, 192}));
  EXPECT_EQ(e[5].shape, Shape({576, 192}));   // the first in_proj_weight
  EXPECT_EQ(e[11].shape, Shape({768, 192}));  // linear1
  EXPECT_EQ(e[e.size() - 2].shape, Shape({1000, 192}));
  absl::StatusOr<std::vector<LayerSpec>> layers = LayerSpecs(spec);
  ASSERT_TRUE(layers.ok()) << layers.status();
  for (int i = 3; i < 7; ++i) {
    EXPECT_TRUE((*layers)[i].transformer_block().bidirectional()) << i;
  }
}

// Trains zoo model `name` one step on two images of `side` x `side`
// (small sizes spare the cost of 224x224) and checks that the loss is
// near ln(1000), every gradient is finite and the gradient reaches the
// first layer through the whole network.
void ExpectOneFiniteStep(const std::string& name, int64_t side) {
  ModelSpec spec;
  spec.set_zoo(name);
  auto model = BuildModel<float>(spec, {3, side, side}, 5);
  ASSERT_TRUE(model.ok()) << model.status();
  Tensor x({3, 2, side, side});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = (i % 23) * 0.1f - 1.1f;
  const Tensor& logits = (*model)->Forward(x, Mode::kTrain);
  ASSERT_EQ(logits.shape(), Shape({2, 1000}));
  Tensor grad;
  const std::vector<int32_t> labels = {3, 999};
  const float loss = SoftmaxCrossEntropy(logits, labels, &grad);
  EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_GT(loss, 1.0f);
  EXPECT_LT(loss, 20.0f);
  (*model)->Backward(grad);
  const Tensor& g = (*model)->grads();
  for (int64_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g[i])) << "gradient " << i;
  }
  const ParamStore<float>::Entry& first = (*model)->param_store().entries()[0];
  double first_norm = 0;
  for (int64_t i = 0; i < NumElements(first.shape); ++i) {
    first_norm += std::abs(g[first.offset + i]);
  }
  EXPECT_GT(first_norm, 0.0);
}

// 32x32: 2x2 patches.
TEST(Zoo, VitTinyForwardBackwardIsFinite) {
  ExpectOneFiniteStep("vit_tiny", 32);
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

// 64x64: stages at 16, 8, 4 and 2 pixels.
TEST(Zoo, Resnet50ForwardBackwardIsFinite) {
  ExpectOneFiniteStep("resnet50", 64);
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

// The model builder and the shape inference the validator and the memory
// estimate use (common/model_sizes.h) must agree exactly: per-layer output
// shapes, and every parameter tensor's length in the flat buffer.
void ExpectInferenceMatchesTheModel(const ModelSpec& spec, const Shape& input) {
  absl::StatusOr<ModelSizes> sizes = InferModelSizes(*LayerSpecs(spec), input);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  auto model = BuildModel<float>(spec, input, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->layer_outputs().size(), sizes->layers.size());
  for (size_t i = 0; i < sizes->layers.size(); ++i) {
    EXPECT_EQ((*model)->layer_outputs()[i], sizes->layers[i].output)
        << "layer " << i;
  }
  std::vector<int64_t> padded;
  for (const auto& e : (*model)->param_store().entries()) {
    padded.push_back((NumElements(e.shape) + 15) / 16 * 16);
  }
  EXPECT_EQ(padded, sizes->PaddedParamSizes());
  EXPECT_EQ((*model)->num_parameters(), sizes->parameters);
  EXPECT_EQ((*model)->params().size(), sizes->padded_parameters);
}

TEST(Zoo, ShapeInferenceAgreesWithEveryZooModel) {
  for (const std::string& name : ZooModelNames()) {
    SCOPED_TRACE(name);
    ModelSpec spec;
    spec.set_zoo(name);
    ExpectInferenceMatchesTheModel(spec, *ZooInputShape(name));
  }
}

TEST(Zoo, ShapeInferenceAgreesWithEveryLayerKind) {
  const struct {
    const char* layers;
    Shape input;
  } cases[] = {
      {"layers { conv1d { out_channels: 5 kernel: 4 stride: 3 padding: 2 } } "
       "layers { batchnorm1d {} } layers { relu {} } layers { dropout { p: "
       "0.5 } } layers { global_avgpool {} } layers { batchnorm1d {} } "
       "layers { linear { out_features: 7 no_bias: true } }",
       {3, 50}},
      {"layers { conv2d { out_channels: 6 kernel: 3 stride: 2 padding: 1 "
       "no_bias: true } } layers { avgpool2d { kernel: 3 stride: 2 padding: "
       "1 } } layers { maxpool2d { kernel: 2 } } layers { residual { "
       "out_channels: 12 stride: 2 bottleneck: true } } layers { residual { "
       "out_channels: 12 } } layers { residual { out_channels: 8 stride: 1 "
       "} } layers { flatten {} } layers { linear { out_features: 3 } }",
       {2, 37, 29}},
      // Grouped, depthwise and dilated convolutions; nested branches.
      {"layers { conv2d { out_channels: 8 kernel: 3 dilation: 2 groups: 2 } } "
       "layers { branch { combine: SUM paths { layers { conv2d { "
       "out_channels: 16 kernel: 1 } } layers { conv2d { out_channels: 16 "
       "kernel: 3 padding: 1 groups: 16 } } layers { conv2d { out_channels: "
       "8 kernel: 1 } } } paths {} } } layers { branch { paths { layers { "
       "branch { paths { layers { conv2d { out_channels: 3 kernel: 1 } } } "
       "paths {} } } } paths { layers { conv2d { out_channels: 5 kernel: 3 "
       "stride: 1 padding: 1 groups: 1 } } } } } "
       "layers { global_avgpool {} } layers { linear { out_features: 3 } }",
       {4, 13, 11}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.layers);
    ModelSpec spec;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.layers, &spec));
    ExpectInferenceMatchesTheModel(spec, c.input);
  }
}

// The inference runs before the layers allocate anything: a model whose
// sizes pass 2^63 is an error naming the layer, not a crash.
TEST(Zoo, SizesPast64BitsAreRefusedBeforeAllocating) {
  ModelSpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "layers { flatten {} } layers { linear { out_features: 2147483647 } }",
      &spec));
  auto model = BuildModel<float>(spec, {1, 100000, 100000}, 1);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("layer 1 (linear)"),
            std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace cohort
