// The checks of a spec's layers: fields and shapes, each error pointing at
// the layer (common/layer_spec_check.h, common/layer_kinds/).
#include <string>

#include "common/spec.h"
#include "common/spec_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

// Sizes (common/model_sizes.h) are the spec's business: a layer whose input
// does not fit, an unknown zoo model or sizes past 2^63 bytes point into
// the file.
// The activation, norm and 1-D pooling layers, on samples of shape [6, 30]
// (line 4 is the first layer).
TEST(ParseJobSpec, ChecksTheNewLayerKinds) {
  auto with = [](const std::string& layers) {
    return "batch_size: 8\nmax_steps: 10\nmodel {\n" + layers +
           "}\noptimizer { lr: 0.01 }\n"
           "data { kind: SYNTHETIC synthetic { shape: [6, 30] } }\n";
  };
  struct Case {
    std::string layers;
    std::string error;
  };
  const Case cases[] = {
      {"  layers { leaky_relu { negative_slope: inf } }\n",
       "4:25: model.layers[0].leaky_relu.negative_slope must be finite, got "
       "inf"},
      {"  layers { layernorm { eps: -1 } }\n",
       "4:24: model.layers[0].layernorm.eps must be >= 0, got -1"},
      {"  layers { groupnorm { groups: 0 } }\n",
       "4:24: model.layers[0].groupnorm.groups must be > 0, got 0"},
      {"  layers { groupnorm { eps: 0.1 } }\n",
       "4:12: model.layers[0].groupnorm.groups must be > 0, got 0 (missing)"},
      {"  layers { groupnorm { groups: 2 eps: -0.5 } }\n",
       "4:34: model.layers[0].groupnorm.eps must be >= 0, got -0.5"},
      {"  layers { groupnorm { groups: 4 } }\n",
       "4:3: layer 0 (groupnorm) cannot take input of shape [6, 30]: groups "
       "(4) must divide the channels (6)"},
      {"  layers { maxpool1d { kernel: 0 } }\n",
       "4:24: model.layers[0].maxpool1d.kernel must be > 0, got 0"},
      {"  layers { avgpool1d { kernel: 2 padding: 2 } }\n",
       "4:34: model.layers[0].avgpool1d.padding must be <= kernel / 2 (1), "
       "got 2"},
      {"  layers { maxpool1d { kernel: 3 stride: -1 } }\n",
       "4:34: model.layers[0].maxpool1d.stride must be >= 0, got -1"},
      {"  layers { maxpool1d { kernel: 40 padding: 2 } }\n",
       "4:3: layer 0 (maxpool1d) cannot take input of shape [6, 30]: the "
       "kernel 40 does not fit the padded input"},
      {"  layers { flatten {} }\n  layers { avgpool1d { kernel: 2 } }\n",
       "5:3: layer 1 (avgpool1d) cannot take input of shape [180]: it expects "
       "a per-sample input [C, L]"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(with(c.layers)), std::string(kFile) + ":" + c.error)
        << c.layers;
  }
  // Every kind on fitting input, and the defaults the spec then records.
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      with("  layers { gelu {} } layers { silu {} } layers { tanh {} }\n"
           "  layers { sigmoid {} } layers { leaky_relu {} }\n"
           "  layers { leaky_relu { negative_slope: 0 } }\n"
           "  layers { layernorm {} } layers { groupnorm { groups: 3 } }\n"
           "  layers { maxpool1d { kernel: 3 stride: 2 padding: 1 } }\n"
           "  layers { avgpool1d { kernel: 2 } }\n"
           "  layers { gelu { tanh_approximation: true } }\n"),
      kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ModelSpec& m = spec->model();
  EXPECT_FLOAT_EQ(m.layers(4).leaky_relu().negative_slope(), 0.01f);
  EXPECT_TRUE(m.layers(5).leaky_relu().has_negative_slope());
  EXPECT_EQ(m.layers(5).leaky_relu().negative_slope(), 0.0f);
  EXPECT_FLOAT_EQ(m.layers(6).layernorm().eps(), 1e-5f);
  EXPECT_FLOAT_EQ(m.layers(7).groupnorm().eps(), 1e-5f);
  EXPECT_EQ(m.layers(9).avgpool1d().stride(), 2);
}

TEST(ParseJobSpec, ChecksSizesPointingAtTheLayer) {
  EXPECT_EQ(ErrorOf(WithLayers("  layers { relu {} }\n"
                               "  layers { linear { out_features: 5 } }\n")),
            "jobs/x.textproto:5:3: layer 1 (linear) cannot take input of "
            "shape [1, 28, 28]: it expects a flat input {features}; put a "
            "flatten layer before it");
  EXPECT_EQ(ErrorOf(Valid("data { kind: CIFAR10 }\n")),
            "jobs/x.textproto:2:9: zoo model lenet5 takes samples of shape "
            "[1, 28, 28] but the data set gives [3, 32, 32]");
  std::string text = Valid();
  text.replace(text.find("lenet5"), 6, "lenet9");
  EXPECT_EQ(ErrorOf(text).rfind("jobs/x.textproto:2:9: unknown zoo model "
                                "\"lenet9\"; known models: ",
                                0),
            0u);
  EXPECT_EQ(ErrorOf(WithLayers("  layers { conv2d { out_channels: 2000000000 "
                               "kernel: 1 padding: 2000000000 } }\n")),
            "jobs/x.textproto:4:3: layer 0 (conv2d) cannot take input of "
            "shape [1, 28, 28]: its output passes 2^63 elements");
  // 784 x 10^8 parameters are fine for arithmetic; whether they fit a
  // machine is the worker's question.
  EXPECT_EQ(ErrorOf(WithLayers("  layers { flatten {} }\n  layers { linear { "
                               "out_features: 100000000 } }\n")),
            "OK");
  const std::string overflow = ErrorOf(
      "batch_size: 2000000000\nmax_steps: 1\noptimizer { lr: 0.1 }\n"
      "model { layers { conv2d { out_channels: 4 kernel: 1 padding: "
      "100000 } }\n        layers { global_avgpool {} } }\n");
  EXPECT_EQ(overflow.rfind("jobs/x.textproto:4:1: layer 0 (conv2d) needs more "
                           "than 8 EiB of activations",
                           0),
            0u)
      << overflow;
}

TEST(ParseJobSpec, ChecksGroupsAndBranchShapesPointingAtTheLayer) {
  EXPECT_EQ(ErrorOf(WithLayers("  layers { conv2d { out_channels: 4 kernel: 3 "
                               "groups: 2 } }\n")),
            "jobs/x.textproto:4:3: layer 0 (conv2d) cannot take input of "
            "shape [1, 28, 28]: groups 2 must divide the 1 input and 4 "
            "output channels");
  EXPECT_EQ(ErrorOf(WithLayers("  layers { conv2d { out_channels: 4 kernel: 5 "
                               "dilation: 7 } }\n")),
            "jobs/x.textproto:4:3: layer 0 (conv2d) cannot take input of "
            "shape [1, 28, 28]: the input padded by 0 is smaller than the "
            "kernel 5 dilated by 7");
  EXPECT_EQ(
      ErrorOf(WithLayers("  layers { branch { combine: SUM paths { } paths { "
                         "layers { conv2d { out_channels: 2 kernel: 3 } } } } "
                         "}\n")),
      "jobs/x.textproto:4:3: layer 0 (branch) cannot take input of shape "
      "[1, 28, 28]: path 1 gives [2, 26, 26] but path 0 gives [1, 28, 28]; "
      "summed paths must give the same shape");
  EXPECT_EQ(
      ErrorOf(WithLayers("  layers { branch { paths { layers { flatten {} } "
                         "layers { linear { out_features: 3 } } } paths { "
                         "layers { conv2d { out_channels: 2 kernel: 3 } } } } "
                         "}\n")),
      "jobs/x.textproto:4:3: layer 0 (branch) cannot take input of shape "
      "[1, 28, 28]: path 1 gives [2, 26, 26] but path 0 gives [3]; "
      "concatenated paths must agree in all but the channels");
  // A per-channel gate scales a feature map only with the same channels.
  EXPECT_EQ(
      ErrorOf(WithLayers("  layers { branch { combine: MUL paths { layers { "
                         "avgpool2d { kernel: 28 } } } paths { layers { "
                         "conv2d { out_channels: 2 kernel: 1 } } } } }\n")),
      "jobs/x.textproto:4:3: layer 0 (branch) cannot take input of shape "
      "[1, 28, 28]: path 1 gives [2, 28, 28] but path 0 gives [1, 1, 1]; "
      "multiplied paths must give the same shape, or [C, 1, 1] to scale "
      "[C, H, W]");
  EXPECT_EQ(
      ErrorOf(WithLayers("  layers { branch { combine: MUL paths { layers { "
                         "avgpool2d { kernel: 28 } } } paths { } paths { "
                         "layers { maxpool2d { kernel: 2 } } } } }\n")),
      "jobs/x.textproto:4:3: layer 0 (branch) cannot take input of shape "
      "[1, 28, 28]: path 2 gives [1, 14, 14] but path 1 gives [1, 28, 28]; "
      "multiplied paths must give the same shape, or [C, 1, 1] to scale "
      "[C, H, W]");
  EXPECT_EQ(
      ErrorOf(WithLayers("  layers { branch { combine: MUL paths { } paths { "
                         "layers { flatten {} } } } }\n")),
      "jobs/x.textproto:4:3: layer 0 (branch) cannot take input of shape "
      "[1, 28, 28]: path 1 gives [784] but path 0 gives [1, 28, 28]; "
      "multiplied paths must give the same shape, or [C, 1, 1] to scale "
      "[C, H, W]");
  EXPECT_EQ(
      ErrorOf(WithLayers("  layers { branch { paths { layers { linear { "
                         "out_features: 3 } } } } }\n")),
      "jobs/x.textproto:4:3: layer 0 (branch) cannot take input of shape "
      "[1, 28, 28]: path 0 layer 0 (linear) cannot take input of shape "
      "[1, 28, 28]: it expects a flat input {features}; put a flatten layer "
      "before it");
  // An inception-style block and a depthwise-separable block.
  EXPECT_EQ(
      ErrorOf(WithLayers(
          "  layers { conv2d { out_channels: 8 kernel: 3 padding: 1 } }\n"
          "  layers { branch { paths { layers { conv2d { out_channels: 4 "
          "kernel: 1 } } } paths { layers { conv2d { out_channels: 8 kernel: "
          "3 padding: 2 dilation: 2 groups: 8 } } } paths { } } }\n"
          "  layers { global_avgpool {} }\n  layers { linear { out_features: "
          "10 } }\n")),
      "OK");
}

// Softmax, PReLU and Upsample on samples of shape [6, 4, 4] (line 4 is the
// first layer): the fields, the shapes, and the defaults filled.
TEST(ParseJobSpec, ChecksSoftmaxPreluAndUpsample) {
  auto with = [](const std::string& layers) {
    return "batch_size: 8\nmax_steps: 10\nmodel {\n" + layers +
           "}\noptimizer { lr: 0.01 }\n"
           "data { kind: SYNTHETIC synthetic { shape: [6, 4, 4] } }\n";
  };
  struct Case {
    std::string layers;
    std::string error;
  };
  const Case cases[] = {
      {"  layers { upsample { } }\n",
       "4:12: model.layers[0].upsample.scale must be >= 1, got 0 (missing)"},
      {"  layers { upsample { scale: -2 } }\n",
       "4:23: model.layers[0].upsample.scale must be >= 1, got -2"},
      {"  layers { flatten {} }\n  layers { upsample { scale: 2 } }\n",
       "5:3: layer 1 (upsample) cannot take input of shape [96]: it expects a "
       "per-sample input [C, H, W]"},
      {"  layers { prelu { num_parameters: -1 } }\n",
       "4:20: model.layers[0].prelu.num_parameters must be >= 0, got -1"},
      {"  layers { prelu { num_parameters: 4 } }\n",
       "4:3: layer 0 (prelu) cannot take input of shape [6, 4, 4]: "
       "num_parameters (4) must be 1 or the input's channels (6)"},
      {"  layers { flatten {} }\n  layers { prelu { num_parameters: 6 } }\n",
       "5:3: layer 1 (prelu) cannot take input of shape [96]: num_parameters "
       "(6) must be 1 or the input's channels (96)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(with(c.layers)), std::string(kFile) + ":" + c.error)
        << c.layers;
  }
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      with("  layers { prelu {} } layers { prelu { num_parameters: 6 init: "
           "0.1 } }\n  layers { upsample { scale: 3 mode: BILINEAR } }\n"
           "  layers { softmax {} } layers { flatten {} }\n"
           "  layers { softmax {} }\n"),
      kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ModelSpec& m = spec->model();
  EXPECT_EQ(m.layers(0).prelu().num_parameters(), 1);
  EXPECT_FLOAT_EQ(m.layers(0).prelu().init(), 0.25f);
  EXPECT_FLOAT_EQ(m.layers(1).prelu().init(), 0.1f);
  EXPECT_EQ(m.layers(2).upsample().mode(), UpsampleSpec::BILINEAR);
}

// A vision transformer's layers on images of shape [6, 4, 4] (line 4 is
// the first layer): patches to a sequence, pooled over the positions.
TEST(ParseJobSpec, ChecksTheVisionTransformerLayers) {
  auto with = [](const std::string& layers) {
    return "batch_size: 8\nmax_steps: 10\nmodel {\n" + layers +
           "}\noptimizer { lr: 0.01 }\n"
           "data { kind: SYNTHETIC synthetic { shape: [6, 4, 4] } }\n";
  };
  struct Case {
    std::string layers;
    std::string error;
  };
  const Case cases[] = {
      {"  layers { to_sequence {} }\n  layers { sequence_pool { mode: 7 } "
       "}\n",
       "5:28: model.layers[1].sequence_pool.mode must be one of MEAN, got 7"},
      {"  layers { sequence_pool {} }\n",
       "4:3: layer 0 (sequence_pool) cannot take input of shape [6, 4, 4]: "
       "it pools a sequence [D, L]; a per-sample input [C, H, W] needs a "
       "to_sequence layer before it (or global_avgpool instead)"},
      {"  layers { flatten {} }\n  layers { sequence_pool {} }\n",
       "5:3: layer 1 (sequence_pool) cannot take input of shape [96]: it "
       "expects a sequence {D, L} (features at each position), as an "
       "embedding gives"},
      {"  layers { flatten {} }\n  layers { to_sequence {} }\n",
       "5:3: layer 1 (to_sequence) cannot take input of shape [96]: it "
       "expects a per-sample input [C, H, W]"},
      {"  layers { to_sequence {} }\n  layers { to_sequence {} }\n",
       "5:3: layer 1 (to_sequence) cannot take input of shape [6, 16]: its "
       "input [C, L] is a sequence already; to_sequence takes a per-sample "
       "input [C, H, W]"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(with(c.layers)), std::string(kFile) + ":" + c.error)
        << c.layers;
  }
  EXPECT_EQ(
      ErrorOf(with("  layers { conv2d { out_channels: 12 kernel: 2 stride: 2 "
                   "} }\n  layers { to_sequence {} }\n"
                   "  layers { positional_embedding {} }\n"
                   "  layers { transformer_block { heads: 3 bidirectional: "
                   "true } }\n  layers { layernorm { per_position: true } }\n"
                   "  layers { sequence_pool { mode: MEAN } }\n"
                   "  layers { linear { out_features: 10 } }\n")),
      "OK");
}

}  // namespace
}  // namespace cohort
