#include "common/model_sizes.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/zoo_specs.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// The layers of a ModelSpec written in text format.
std::vector<LayerSpec> Layers(const std::string& text) {
  ModelSpec m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return {m.layers().begin(), m.layers().end()};
}

ModelSizes Zoo(const std::string& name) {
  ModelSpec m;
  m.set_zoo(name);
  absl::StatusOr<ModelSizes> s =
      InferModelSizes(*LayerSpecs(m), *ZooInputShape(name));
  EXPECT_TRUE(s.ok()) << name << ": " << s.status();
  return s.ok() ? *s : ModelSizes();
}

// The counts PyTorch reports for the same architectures (worker/zoo_test.cc
// checks the built models against the same numbers).
TEST(ModelSizes, ZooParameterCountsWithoutBuildingTheModels) {
  EXPECT_EQ(Zoo("mlp_seed").parameters, 100 * 200 + 200 + 200 * 10 + 10);
  EXPECT_EQ(Zoo("lenet5").parameters, 61706);
  EXPECT_EQ(Zoo("lenet_cifar").parameters, 62006);
  EXPECT_EQ(Zoo("resnet18_cifar").parameters, 11173962);
  EXPECT_EQ(Zoo("resnet50").parameters, 25557032);
  // torchvision's 161 parameter tensors.
  EXPECT_EQ(Zoo("resnet50").PaddedParamSizes().size(), 161u);
  EXPECT_EQ(Zoo("resnet50").layers.back().output, Shape({1000}));
}

TEST(ModelSizes, LenetShapesLayerByLayer) {
  const ModelSizes s = Zoo("lenet5");
  ASSERT_EQ(s.layers.size(), 12u);
  EXPECT_EQ(s.layers[0].kind, "conv2d");
  EXPECT_EQ(s.layers[0].output, Shape({6, 28, 28}));
  EXPECT_EQ(s.layers[0].param_tensors, std::vector<int64_t>({6 * 25, 6}));
  EXPECT_EQ(s.layers[2].output, Shape({6, 14, 14}));   // maxpool2d
  EXPECT_EQ(s.layers[3].output, Shape({16, 10, 10}));  // conv2d k5
  EXPECT_EQ(s.layers[6].output, Shape({400}));         // flatten
  EXPECT_EQ(s.layers[11].output, Shape({10}));
  // Backward's buffers: layer 11 (n - 1) writes the gradient of layer
  // 10's output into one, layer 10 that of layer 9's into the other, ...;
  // the largest each carries are layer 0's [6, 28, 28] (written by layer
  // 1) and layer 1's (by layer 2).
  ASSERT_EQ(s.gradient_buffers.size(), 2u);
  EXPECT_EQ(s.gradient_buffers[0].layer, 0);
  EXPECT_EQ(s.gradient_buffers[0].elements, 6 * 28 * 28);
  EXPECT_EQ(s.gradient_buffers[1].layer, 1);
  // Each tensor starts at a multiple of 16 elements: 150 -> 160, 6 -> 16...
  EXPECT_EQ(s.PaddedParamSizes()[0], 160);
  EXPECT_EQ(s.PaddedParamSizes()[1], 16);
}

TEST(ModelSizes, ResidualBlocksCountTheirInnerActivations) {
  const std::vector<LayerSpec> block =
      Layers("layers { residual { out_channels: 8 stride: 2 } }");
  absl::StatusOr<ModelSizes> s = InferModelSizes(block, {4, 10, 10});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers[0].output, Shape({8, 5, 5}));
  // conv1, bn1, conv2, bn2 and the shortcut's conv and bn.
  EXPECT_EQ(
      s->layers[0].param_tensors,
      std::vector<int64_t>({8 * 4 * 9, 8, 8, 8 * 8 * 9, 8, 8, 8 * 4, 8, 8}));
  // conv1, bn1, relu, conv2, bn2 and the shortcut's two, all [8, 5, 5].
  EXPECT_EQ(s->layers[0].activations, 7 * 8 * 5 * 5);
}

// Squeeze-and-excitation: the [C, 1, 1] gate (first or last) scales the
// feature map, so the block gives the map's shape.
TEST(ModelSizes, MultipliedBranchGivesTheFullShape) {
  const std::string gate =
      "paths { layers { avgpool2d { kernel: 6 } } layers { conv2d { "
      "out_channels: 2 kernel: 1 } } layers { relu {} } layers { conv2d { "
      "out_channels: 8 kernel: 1 } } layers { sigmoid {} } }";
  for (const std::string& paths :
       {"paths {} " + gate, gate + " paths {}", gate + " paths {} " + gate}) {
    absl::StatusOr<ModelSizes> s = InferModelSizes(
        Layers("layers { branch { combine: MUL " + paths + " } }"), {8, 6, 6});
    ASSERT_TRUE(s.ok()) << paths << ": " << s.status();
    EXPECT_EQ(s->layers[0].output, Shape({8, 6, 6})) << paths;
  }
}

// conv2d's [height, width] windows and padding SAME (an even kernel keeps
// the size too), and conv_transpose2d's output size and weight
// {C, OC / G, K, K}.
TEST(ModelSizes, RectangularSameAndTransposedConvolutions) {
  absl::StatusOr<ModelSizes> s = InferModelSizes(
      Layers("layers { conv2d { out_channels: 4 kernel_hw: [1, 7] "
             "padding_hw: [0, 3] } } "
             "layers { conv2d { out_channels: 4 kernel: 3 stride_hw: [2, 1] "
             "padding: 1 no_bias: true } } "
             "layers { conv2d { out_channels: 6 kernel_hw: [4, 2] "
             "padding_mode: SAME groups: 2 } } "
             "layers { conv2d { out_channels: 6 kernel: 3 dilation: 2 "
             "padding_mode: SAME } } "
             "layers { conv_transpose2d { out_channels: 4 kernel: 3 stride: 2 "
             "padding: 1 output_padding: 1 groups: 2 } }"),
      {3, 9, 10});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers[0].output, Shape({4, 9, 10}));
  EXPECT_EQ(s->layers[0].param_tensors, std::vector<int64_t>({4 * 3 * 7, 4}));
  EXPECT_EQ(s->layers[1].output, Shape({4, 5, 10}));
  EXPECT_EQ(s->layers[1].param_tensors, std::vector<int64_t>({4 * 4 * 9}));
  EXPECT_EQ(s->layers[2].output, Shape({6, 5, 10}));
  EXPECT_EQ(s->layers[2].param_tensors, std::vector<int64_t>({6 * 2 * 8, 6}));
  EXPECT_EQ(s->layers[3].output, Shape({6, 5, 10}));
  EXPECT_EQ(s->layers[4].output, Shape({4, 10, 20}));
  EXPECT_EQ(s->layers[4].param_tensors, std::vector<int64_t>({6 * 2 * 9, 4}));
  s = InferModelSizes(Layers("layers { conv_transpose2d { out_channels: 2 "
                             "kernel: 1 padding: 1 } }"),
                      {3, 2, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("padding 1 on each side of 2 output "
                                      "positions leaves none"),
            std::string::npos)
      << s.status();
}

TEST(ModelSizes, HugeButRepresentableSizesAreExact) {
  absl::StatusOr<ModelSizes> s = InferModelSizes(
      Layers("layers { flatten {} } layers { linear { out_features: "
             "2147483647 } }"),
      {1, 28, 28});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->parameters, int64_t{785} * 2147483647);
  s = InferModelSizes(
      Layers("layers { conv2d { out_channels: 4 kernel: 1 padding: 100000 } }"),
      {1, 28, 28});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers[0].output, Shape({4, 200028, 200028}));
  EXPECT_EQ(s->layers[0].activations, int64_t{4} * 200028 * 200028);
}

TEST(ModelSizes, SizesPast64BitsAreErrorsNamingTheLayer) {
  int failed = -2;
  absl::StatusOr<ModelSizes> s = InferModelSizes(
      Layers("layers { relu {} } layers { conv2d { out_channels: 2000000000 "
             "kernel: 1 padding: 2000000000 } }"),
      {1, 1000000, 1000000}, &failed);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed, 1);
  EXPECT_NE(s.status().message().find("layer 1 (conv2d)"), std::string::npos)
      << s.status();
  EXPECT_NE(s.status().message().find("2^63"), std::string::npos) << s.status();
  // The input itself.
  s = InferModelSizes(Layers("layers { relu {} }"),
                      {int64_t{1} << 32, int64_t{1} << 32}, &failed);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(failed, -1);
  EXPECT_NE(s.status().message().find("more than 2^63"), std::string::npos);
}

TEST(ModelSizes, InputsThatDoNotFitNameTheLayerAndShape) {
  int failed = -2;
  absl::StatusOr<ModelSizes> s =
      InferModelSizes(Layers("layers { linear { out_features: 50 } } "
                             "layers { conv2d { out_channels: 4 kernel: 3 } }"),
                      {100}, &failed);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(failed, 1);
  EXPECT_NE(s.status().message().find(
                "layer 1 (conv2d) cannot take input of shape [50]"),
            std::string::npos)
      << s.status();
  s = InferModelSizes(Layers("layers { linear { out_features: 5 } }"),
                      {1, 28, 28});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("flatten"), std::string::npos);
  s = InferModelSizes(Layers("layers { maxpool2d { kernel: 5 } }"), {1, 3, 3});
  EXPECT_FALSE(s.ok());
}

TEST(ModelSizes, JobSizesUseTheDataSetsSampleShape) {
  JobSpec spec;
  spec.mutable_model()->set_zoo("lenet_cifar");
  spec.mutable_data()->set_kind(DatasetSpec::CIFAR10);
  EXPECT_TRUE(InferJobModelSizes(spec).ok());
  spec.mutable_data()->set_kind(DatasetSpec::MNIST);
  absl::StatusOr<ModelSizes> s = InferJobModelSizes(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("takes samples of shape [3, 32, 32]"),
            std::string::npos)
      << s.status();
  spec.mutable_model()->set_zoo("lenet9");
  EXPECT_EQ(InferJobModelSizes(spec).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(DataSampleShape(DatasetSpec()), Shape({1, 28, 28}));
}

// optimizer.no_decay_bias_and_norm's tensors: every bias and every norm
// layer's parameters, inside residual blocks too.
TEST(ModelSizes, FlagsBiasesAndNormParameters) {
  std::vector<LayerSpec> layers(4);
  layers[0].mutable_conv2d()->set_out_channels(4);
  layers[0].mutable_conv2d()->set_kernel(3);
  layers[1].mutable_batchnorm2d();
  layers[2].mutable_residual()->set_out_channels(8);
  layers[3].mutable_flatten();
  absl::StatusOr<ModelSizes> sizes = InferModelSizes(layers, {3, 8, 8});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  // conv weight, bias; bn weight, bias; residual: conv, bn, bn... as
  // (conv, bn x2) twice, then the shortcut's conv and bn x2.
  const std::vector<bool> want = {false, true, true, true,  false, true, true,
                                  false, true, true, false, true,  true};
  EXPECT_EQ(sizes->ParamNoDecay(), want);
  EXPECT_EQ(sizes->ParamNoDecay().size(), sizes->PaddedParamSizes().size());
  EXPECT_TRUE(IsBiasOrNormParam("layernorm", "weight"));
  EXPECT_TRUE(IsBiasOrNormParam("linear", "bias"));
  EXPECT_FALSE(IsBiasOrNormParam("linear", "weight"));
}

// Inside a branch too (MobileNet's inverted residuals hold batch norms).
TEST(ModelSizes, FlagsNormParametersInsideBranches) {
  std::vector<LayerSpec> layers(1);
  BranchSpec* b = layers[0].mutable_branch();
  b->set_combine(BranchSpec::SUM);
  auto* path = b->add_paths();
  ConvSpec* c = path->add_layers()->mutable_conv2d();
  c->set_out_channels(3);
  c->set_kernel(1);
  path->add_layers()->mutable_batchnorm2d();
  b->add_paths();
  absl::StatusOr<ModelSizes> sizes = InferModelSizes(layers, {3, 4, 4});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(sizes->ParamNoDecay(),
            std::vector<bool>({false, true, true, true}));
}

// A GPT: embeddings and norms and biases are excluded from decay; the tied
// head holds nothing; shapes follow the sequence layout {D, L}.
TEST(ModelSizes, InfersATransformer) {
  std::vector<LayerSpec> layers(5);
  layers[0].mutable_embedding()->set_vocab_size(50);
  layers[0].mutable_embedding()->set_dim(8);
  layers[1].mutable_positional_embedding();
  layers[2].mutable_transformer_block()->set_heads(2);
  layers[3].mutable_layernorm()->set_per_position(true);
  layers[4].mutable_tied_lm_head();
  absl::StatusOr<ModelSizes> sizes = InferModelSizes(layers, {1, 6});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(sizes->layers[0].output, Shape({8, 6}));
  EXPECT_EQ(sizes->layers[4].output, Shape({50, 6}));
  EXPECT_EQ(sizes->layers[4].param_tensors.size(), 0u);
  EXPECT_EQ(
      sizes->layers[2].param_tensors,
      std::vector<int64_t>({8, 8, 192, 24, 64, 8, 8, 8, 256, 32, 256, 8}));
  const std::vector<bool> want = {true,  true, true, true, false, true,
                                  false, true, true, true, false, true,
                                  false, true, true, true};
  EXPECT_EQ(sizes->ParamNoDecay(), want);
  EXPECT_EQ(sizes->parameters, 50 * 8 + 6 * 8 + 8 + 8 + 192 + 24 + 64 + 8 + 8 +
                                   8 + 256 + 32 + 256 + 8 + 8 + 8);
}

TEST(ModelSizes, RefusesMisplacedTransformerLayers) {
  std::vector<LayerSpec> head(1);
  head[0].mutable_tied_lm_head();
  absl::StatusOr<ModelSizes> s = InferModelSizes(head, {8, 6});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("needs an embedding layer before it"),
            std::string::npos)
      << s.status();
  std::vector<LayerSpec> emb(1);
  emb[0].mutable_embedding()->set_vocab_size(5);
  emb[0].mutable_embedding()->set_dim(4);
  s = InferModelSizes(emb, {3, 6});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("token ids {1, L}"), std::string::npos)
      << s.status();
  std::vector<LayerSpec> attn(2);
  attn[0] = emb[0];
  attn[1].mutable_attention()->set_heads(3);
  s = InferModelSizes(attn, {1, 6});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("heads (3) must divide the features (4)"),
            std::string::npos)
      << s.status();
}

// A per-position linear maps each position's features, keeping the length,
// with nn.Linear's tensors; without a sequence in front it says what it
// wants.
TEST(ModelSizes, InfersAPerPositionLinear) {
  std::vector<LayerSpec> layers(2);
  layers[0].mutable_linear()->set_out_features(12);
  layers[0].mutable_linear()->set_per_position(true);
  layers[1].mutable_linear()->set_out_features(4);
  layers[1].mutable_linear()->set_per_position(true);
  layers[1].mutable_linear()->set_no_bias(true);
  absl::StatusOr<ModelSizes> sizes = InferModelSizes(layers, {8, 6});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(sizes->layers[0].output, Shape({12, 6}));
  EXPECT_EQ(sizes->layers[0].param_tensors, std::vector<int64_t>({96, 12}));
  EXPECT_EQ(sizes->layers[1].output, Shape({4, 6}));
  EXPECT_EQ(sizes->layers[1].param_tensors, std::vector<int64_t>({48}));
  EXPECT_EQ(sizes->ParamNoDecay(), std::vector<bool>({false, true, false}));
  EXPECT_EQ(sizes->parameters, 96 + 12 + 48);
  for (const Shape& flat : {Shape{8}, Shape{3, 4, 4}}) {
    absl::StatusOr<ModelSizes> s = InferModelSizes({layers[0]}, flat);
    ASSERT_FALSE(s.ok()) << ShapeString(flat);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(),
              absl::StrCat("layer 0 (linear) cannot take input of shape ",
                           ShapeString(flat),
                           ": it expects a sequence {D, L} (features at each "
                           "position), as an embedding gives"));
  }
  // Without per_position a sequence is refused, naming the option.
  std::vector<LayerSpec> flat(1);
  flat[0].mutable_linear()->set_out_features(3);
  absl::StatusOr<ModelSizes> s = InferModelSizes(flat, {8, 6});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("set per_position"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace cohort
