#include "common/spec.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec_test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

TEST(ParseJobSpec, AcceptsMinimalSpec) { EXPECT_EQ(ErrorOf(Valid()), "OK"); }

TEST(ParseJobSpec, ReportsSyntaxErrorWithLocation) {
  EXPECT_EQ(ErrorOf("name: \"t\"\nbatch_size: 32\nmodel { zoo: \"a\"\n"),
            "jobs/x.textproto:4:1: Expected identifier, got: ");
  EXPECT_EQ(ErrorOf("batch_size: 3x\n"),
            "jobs/x.textproto:1:14: Need space between number and identifier.");
}

TEST(ParseJobSpec, ReportsUnknownFieldWithLocation) {
  EXPECT_EQ(ErrorOf(Valid("data {\n  kind: MNIST\n  dirr: \"/d\"\n}\n")),
            "jobs/x.textproto:8:3: Message type \"cohort.DatasetSpec\" has no "
            "field named \"dirr\"; did you mean \"dir\"?");
}

TEST(ParseJobSpec, SuggestsTheNearestFieldName) {
  EXPECT_EQ(ErrorOf(WithLayers("  layers { conv2d { out_channels: 4 "
                               "kernel_size: 3 } }\n")),
            "jobs/x.textproto:4:37: Message type \"cohort.ConvSpec\" has no "
            "field named \"kernel_size\"; did you mean \"kernel\"?");
  EXPECT_EQ(ErrorOf(Valid("bacth_size: 4\n")),
            "jobs/x.textproto:6:1: Message type \"cohort.JobSpec\" has no "
            "field named \"bacth_size\"; did you mean \"batch_size\"?");
  // Nothing near: the parser's message as it is.
  EXPECT_EQ(ErrorOf(Valid("zzzzzzzz: 4\n")),
            "jobs/x.textproto:6:1: Message type \"cohort.JobSpec\" has no "
            "field named \"zzzzzzzz\".");
}

TEST(ParseJobSpec, CountsTabsAsProtobufDoes) {
  EXPECT_EQ(ErrorOf("\tbatch_sizee: 3\n"),
            "jobs/x.textproto:1:9: Message type \"cohort.JobSpec\" has no "
            "field named \"batch_sizee\"; did you mean \"batch_size\"?");
  EXPECT_EQ(ErrorOf("batch_size: 3\n\tepochs:\t-1\n"),
            "jobs/x.textproto:2:9: epochs must be >= 0, got -1");
}

TEST(ParseJobSpec, ReportsUnknownEnumName) {
  EXPECT_EQ(ErrorOf(Valid("data { kind: IMAGENET }\n")),
            "jobs/x.textproto:6:14: Unknown enumeration value of "
            "\"IMAGENET\" for field \"kind\".");
}

TEST(ParseJobSpec, RejectsUnknownEnumNumber) {
  EXPECT_EQ(ErrorOf(Valid("data { kind: 9 }\n")),
            "jobs/x.textproto:6:8: data.kind must be one of SYNTHETIC, MNIST, "
            "CIFAR10, NUMPY, CSV, IMAGE_FOLDER, TOKENS, CRITEO, got 9");
}

TEST(ParseJobSpec, PointsAtInvalidTopLevelValue) {
  std::string text = Valid();
  text.replace(text.find("batch_size: 32"), 14, "  batch_size: -4");
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto:3:3: batch_size must be > 0, got -4");
}

TEST(ParseJobSpec, ReportsMissingFieldAtFile) {
  std::string text = Valid();
  text.erase(text.find("batch_size: 32\n"), 15);
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto: batch_size must be > 0, got 0 (missing)");
}

TEST(ParseJobSpec, ReportsMissingNestedFieldAtEnclosingMessage) {
  std::string text = Valid();
  text.replace(text.find("optimizer { lr: 0.1 }"), 21,
               "optimizer { momentum: 0.9 }");
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto:5:1: optimizer.lr must be > 0, got 0 (missing)");
  text.erase(text.find("optimizer {"));
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto: optimizer.lr must be > 0, got 0 (missing)");
}

TEST(ParseJobSpec, NeedsEpochsOrMaxSteps) {
  std::string text = Valid();
  text.erase(text.find("epochs: 2\n"), 10);
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto: epochs must be > 0 when max_steps is 0, got 0 "
            "(missing)");
  EXPECT_EQ(ErrorOf(text + "max_steps: 0\n"),
            "jobs/x.textproto:5:1: max_steps must be > 0 when epochs is 0, "
            "got 0");
  EXPECT_EQ(ErrorOf(text + "max_steps: 100\n"), "OK");
  EXPECT_EQ(ErrorOf(Valid("max_steps: -1\n")),
            "jobs/x.textproto:6:1: max_steps must be >= 0, got -1");
  EXPECT_EQ(ErrorOf(Valid("epochs: 1\n")),
            "jobs/x.textproto:6:1: Non-repeated field \"epochs\" is specified "
            "multiple times.");
}

TEST(ParseJobSpec, ModelNeedsExactlyOneOfZooAndLayers) {
  std::string text = Valid();
  text.replace(text.find("model { zoo: \"lenet5\" }"), 23, "model { }");
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto:2:1: model.zoo or model.layers or model.onnx "
            "must be given, got none (missing)");
  text.replace(text.find("model { }"), 9,
               "model { layers { relu {} } zoo: \"mlp\" }");
  EXPECT_EQ(ErrorOf(text),
            "jobs/x.textproto:2:28: model.zoo must be empty when layers or "
            "onnx are given, got \"mlp\"");
}

TEST(ParseJobSpec, LayerNamesAreModulePathsAndUnique) {
  std::string text = Valid();
  const std::string lenet = "model { zoo: \"lenet5\" }";
  text.replace(text.find(lenet), lenet.size(),
               "model { layers { linear { out_features: 10 } name: \"fc..1\" "
               "} }");
  EXPECT_THAT(ErrorOf(text),
              HasSubstr("model.layers[0].name must be dot-separated names"));
  text.replace(text.find("fc..1"), 5, "fc 1");
  EXPECT_THAT(ErrorOf(text), HasSubstr("letters, digits"));
  text.replace(text.find("} }"), 3,
               "} layers { branch { paths { layers { linear { out_features: "
               "10 } name: \"head\" } } combine: SUM } } }");
  text.replace(text.find("fc 1"), 4, "head");
  EXPECT_THAT(ErrorOf(text), HasSubstr("name \"head\" is given to two layers"));
}

TEST(ParseJobSpec, AnOnnxModelThatCannotBeReadIsNamed) {
  std::string text = Valid();
  const std::string lenet = "model { zoo: \"lenet5\" }";
  text.replace(text.find(lenet), lenet.size(),
               "model { onnx: \"/nonexistent/m.onnx\" }");
  EXPECT_THAT(ErrorOf(text), HasSubstr("model.onnx \"/nonexistent/m.onnx\": "));
  text.replace(text.find("model {"), 7, "model { zoo: \"mlp\"");
  EXPECT_THAT(ErrorOf(text), HasSubstr("model.zoo must be empty when onnx"));
}

TEST(ParseJobSpec, ChecksEveryLayerKind) {
  struct Case {
    std::string layer;
    std::string error;
  };
  const Case cases[] = {
      {"  layers { linear { out_features: 0 } }",
       "5:21: model.layers[1].linear.out_features must be > 0, got 0"},
      {"  layers { linear { } }",
       "5:12: model.layers[1].linear.out_features must be > 0, got 0 "
       "(missing)"},
      {"  layers { conv2d { out_channels: 4 kernel: -3 } }",
       "5:37: model.layers[1].conv2d.kernel must be > 0, got -3"},
      {"  layers { conv1d { out_channels: 4 kernel: 3 stride: -1 } }",
       "5:47: model.layers[1].conv1d.stride must be >= 0, got -1"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 padding: -1 } }",
       "5:47: model.layers[1].conv2d.padding must be >= 0, got -1"},
      {"  layers { conv2d { kernel: 3 } }",
       "5:12: model.layers[1].conv2d.out_channels must be > 0, got 0 "
       "(missing)"},
      {"  layers { batchnorm2d { eps: -1e-5 } }",
       "5:26: model.layers[1].batchnorm2d.eps must be >= 0, got -1e-05"},
      {"  layers { batchnorm1d { momentum: 1.5 } }",
       "5:26: model.layers[1].batchnorm1d.momentum must be in [0, 1], got "
       "1.5"},
      {"  layers { maxpool2d { kernel: 0 } }",
       "5:24: model.layers[1].maxpool2d.kernel must be > 0, got 0"},
      {"  layers { avgpool2d { kernel: 2 padding: 2 } }",
       "5:34: model.layers[1].avgpool2d.padding must be <= kernel / 2 (1), "
       "got 2"},
      {"  layers { maxpool2d { kernel: 2 stride: -2 } }",
       "5:34: model.layers[1].maxpool2d.stride must be >= 0, got -2"},
      {"  layers { dropout { p: 1 } }",
       "5:22: model.layers[1].dropout.p must be in [0, 1), got 1"},
      {"  layers { dropout { p: -0.5 } }",
       "5:22: model.layers[1].dropout.p must be in [0, 1), got -0.5"},
      {"  layers { residual { out_channels: 0 } }",
       "5:23: model.layers[1].residual.out_channels must be > 0, got 0"},
      {"  layers { residual { out_channels: 8 stride: -1 } }",
       "5:39: model.layers[1].residual.stride must be >= 0, got -1"},
      {"  layers { residual { out_channels: 6 bottleneck: true } }",
       "5:23: model.layers[1].residual.out_channels must be a multiple of 4 "
       "with bottleneck: true, got 6"},
      {"  layers { residual { out_channels: 0 bottleneck: true } }",
       "5:23: model.layers[1].residual.out_channels must be > 0, got 0"},
      {"  layers { }",
       "5:3: model.layers[1] must set a layer kind (linear, "
       "conv2d, relu, ...), got none"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 groups: -2 } }",
       "5:47: model.layers[1].conv2d.groups must be >= 0, got -2"},
      {"  layers { conv1d { out_channels: 4 kernel: 3 dilation: -1 } }",
       "5:47: model.layers[1].conv1d.dilation must be >= 0, got -1"},
      {"  layers { conv2d { out_channels: 6 kernel: 3 groups: 4 } }",
       "5:47: model.layers[1].conv2d.groups must be a divisor of "
       "out_channels (6), got 4"},
      {"  layers { conv_transpose2d { out_channels: 4 kernel: 3 stride: 2 "
       "output_padding: 2 } }",
       "5:67: model.layers[1].conv_transpose2d.output_padding must be < "
       "stride (2), got 2"},
      {"  layers { conv_transpose2d { out_channels: 4 kernel: 3 "
       "output_padding: 1 } }",
       "5:57: model.layers[1].conv_transpose2d.output_padding must be < "
       "stride (1), got 1"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 stride: 2 "
       "padding_mode: SAME } }",
       "5:47: model.layers[1].conv2d.stride must be 1 with padding_mode SAME "
       "(PyTorch's padding=\"same\"), got 2"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 stride_hw: [1, 2] "
       "padding_mode: SAME } }",
       "5:47: model.layers[1].conv2d.stride_hw must be [1, 1] with "
       "padding_mode SAME (PyTorch's padding=\"same\"), got [1, 2]"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 padding: 1 "
       "padding_mode: SAME } }",
       "5:47: model.layers[1].conv2d.padding must be 0 with padding_mode "
       "SAME, which computes it, got 1"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 padding_hw: [1, 0] "
       "padding_mode: SAME } }",
       "5:47: model.layers[1].conv2d.padding_hw must be empty with "
       "padding_mode SAME, which computes it, got [1, 0]"},
      {"  layers { conv2d { out_channels: 4 kernel_hw: [1, 7, 3] } }",
       "5:37: model.layers[1].conv2d.kernel_hw must list two values "
       "[height, width], got 3: [1, 7, 3]"},
      {"  layers { conv2d { out_channels: 4 kernel_hw: [1, 0] } }",
       "5:37: model.layers[1].conv2d.kernel_hw[1] must be > 0, got 0"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 kernel_hw: [1, 7] } }",
       "5:37: model.layers[1].conv2d.kernel must be unset when kernel_hw "
       "lists [height, width], got 3"},
      {"  layers { conv2d { out_channels: 4 kernel: 3 padding_hw: [1, -1] } }",
       "5:47: model.layers[1].conv2d.padding_hw[1] must be >= 0, got -1"},
      {"  layers { conv1d { out_channels: 4 kernel_hw: [1, 7] } }",
       "5:37: model.layers[1].conv1d.kernel_hw applies only to conv2d, got "
       "kind conv1d"},
      {"  layers { conv1d { out_channels: 4 kernel: 3 padding_mode: SAME } }",
       "5:47: model.layers[1].conv1d.padding_mode applies only to conv2d, "
       "got kind conv1d"},
      {"  layers { branch { } }",
       "5:12: model.layers[1].branch.paths must list at least one path, "
       "got none (missing)"},
      {"  layers { branch { paths { } paths { layers { relu {} } layers { "
       "dropout { p: 2 } } } } }",
       "5:77: model.layers[1].branch.paths[1].layers[1].dropout.p must be in "
       "[0, 1), got 2"},
      {"  layers { branch { paths { layers { } } } }",
       "5:29: model.layers[1].branch.paths[0].layers[0] must set a layer "
       "kind (linear, conv2d, relu, ...), got none"},
  };
  for (const Case& c : cases) {
    std::string text = WithLayers("  layers { flatten {} }\n" + c.layer + "\n");
    EXPECT_EQ(ErrorOf(text), std::string(kFile) + ":" + c.error) << c.layer;
  }
}

TEST(ParseJobSpec, ChecksOptimizer) {
  struct Case {
    std::string optimizer;
    std::string error;
  };
  const Case cases[] = {
      {"lr: -0.1", "6:13: optimizer.lr must be > 0, got -0.1"},
      {"lr: inf", "6:13: optimizer.lr must be finite, got inf"},
      {"lr: nan", "6:13: optimizer.lr must be finite, got nan"},
      {"lr: 0.1 momentum: 1",
       "6:21: optimizer.momentum must be in [0, 1), got 1"},
      {"lr: 0.1 weight_decay: -1",
       "6:21: optimizer.weight_decay must be >= 0, got -1"},
      {"lr: 0.1 nesterov: true",
       "6:21: optimizer.nesterov needs momentum > 0, got momentum 0"},
      {"kind: ADAM lr: 0.1 beta1: 1",
       "6:32: optimizer.beta1 must be in [0, 1), got 1"},
      {"kind: ADAMW lr: 0.1 beta2: -0.5",
       "6:33: optimizer.beta2 must be in [0, 1), got -0.5"},
      {"kind: ADAM lr: 0.1 eps: -1",
       "6:32: optimizer.eps must be >= 0, got -1"},
      {"kind: ADAM lr: 0.1 momentum: 0.9",
       "6:32: optimizer.momentum applies only to SGD, RMSPROP and LARS, got "
       "kind ADAM"},
      {"lr: 0.1 beta1: 0.8",
       "6:21: optimizer.beta1 applies only to ADAM, ADAMW and LAMB, got kind "
       "SGD"},
      {"kind: RMSPROP lr: 0.1 alpha: 1",
       "6:35: optimizer.alpha must be in [0, 1), got 1"},
      {"kind: LARS lr: 0.1 trust_coefficient: -1",
       "6:32: optimizer.trust_coefficient must be >= 0, got -1"},
      {"lr: 0.1 no_decay_bias_and_norm: true",
       "6:21: optimizer.no_decay_bias_and_norm needs weight_decay > 0, got "
       "weight_decay 0"},
      {"kind: ADAM lr: 0.1 alpha: 0.9",
       "6:32: optimizer.alpha applies only to RMSPROP, got kind ADAM"},
      {"kind: SGD lr: 0.1 centered: true",
       "6:31: optimizer.centered applies only to RMSPROP, got kind SGD"},
      {"kind: LAMB lr: 0.1 trust_coefficient: 0.01",
       "6:32: optimizer.trust_coefficient applies only to LARS, got kind "
       "LAMB"},
      {"kind: LARS lr: 0.1 eps: 0.01",
       "6:32: optimizer.eps applies only to ADAM, ADAMW, LAMB, RMSPROP and "
       "ADAGRAD, got kind LARS"},
      {"kind: ADAM lr: 0.1 lr_decay: 0.01",
       "6:32: optimizer.lr_decay applies only to ADAGRAD, got kind ADAM"},
      {"kind: SGD lr: 0.1 initial_accumulator_value: 0.1",
       "6:31: optimizer.initial_accumulator_value applies only to ADAGRAD, "
       "got kind SGD"},
      {"kind: ADAGRAD lr: 0.1 lr_decay: -1",
       "6:35: optimizer.lr_decay must be >= 0, got -1"},
      {"kind: LAMB lr: 0.1 nesterov: true momentum: 0.9",
       "6:47: optimizer.momentum applies only to SGD, RMSPROP and LARS, got "
       "kind LAMB"},
      {"kind: RMSPROP lr: 0.1 beta2: 0.9",
       "6:35: optimizer.beta2 applies only to ADAM, ADAMW and LAMB, got kind "
       "RMSPROP"},
  };
  for (const Case& c : cases) {
    std::string text = Valid();
    // Line 5 left blank; the optimizer goes on line 6, its fields from
    // column 13.
    text.replace(text.find("optimizer {"), std::string::npos,
                 "\noptimizer { " + c.optimizer + " }\n");
    EXPECT_EQ(ErrorOf(text), std::string(kFile) + ":" + c.error) << c.optimizer;
  }
}

TEST(ParseJobSpec, ChecksSchedule) {
  struct Case {
    std::string schedule;
    std::string error;
  };
  const Case cases[] = {
      {"kind: STEP", "6:1: lr_schedule.step_size must be > 0, got 0 (missing)"},
      {"kind: STEP step_size: 10",
       "6:1: lr_schedule.gamma must be in (0, 1], got 0 (missing)"},
      {"kind: STEP step_size: 10 gamma: 1.5",
       "6:40: lr_schedule.gamma must be in (0, 1], got 1.5"},
      {"kind: COSINE warmup_steps: -5",
       "6:28: lr_schedule.warmup_steps must be >= 0, got -5"},
      {"kind: COSINE min_lr: -1",
       "6:28: lr_schedule.min_lr must be >= 0, got -1"},
      {"kind: COSINE min_lr: 0.5",
       "6:28: lr_schedule.min_lr must be <= optimizer.lr (0.1), got 0.5"},
      {"step_size: 3",
       "6:15: lr_schedule.step_size applies only to STEP, got kind CONSTANT"},
      {"kind: STEP step_size: 1 gamma: 0.5 min_lr: 0.01",
       "6:50: lr_schedule.min_lr applies only to COSINE, got kind STEP"},
      {"kind: MULTI_STEP gamma: 0.5",
       "6:1: lr_schedule.milestones must list at least one step (missing)"},
      {"kind: MULTI_STEP gamma: 0.5 milestones: [10, 10]",
       "6:43: lr_schedule.milestones[1] must be > the one before (10), got 10"},
      {"kind: MULTI_STEP gamma: 0.5 milestones: -3",
       "6:43: lr_schedule.milestones[0] must be > 0, got -3"},
      {"kind: EXPONENTIAL",
       "6:1: lr_schedule.gamma must be in (0, 1], got 0 "
       "(missing)"},
      {"kind: ONE_CYCLE pct_start: 1",
       "6:31: lr_schedule.pct_start must be in (0, 1), got 1"},
      {"kind: ONE_CYCLE div_factor: 0.5",
       "6:31: lr_schedule.div_factor must be >= 1, got 0.5"},
      {"kind: POLYNOMIAL power: -1",
       "6:32: lr_schedule.power must be >= 0, got -1"},
      {"kind: COSINE power: 2",
       "6:28: lr_schedule.power applies only to POLYNOMIAL, got kind COSINE"},
      {"kind: EXPONENTIAL gamma: 0.9 milestones: 5",
       "6:44: lr_schedule.milestones applies only to MULTI_STEP, got kind "
       "EXPONENTIAL"},
  };
  for (const Case& c : cases) {
    std::string text = Valid("lr_schedule { " + c.schedule + " }\n");
    EXPECT_EQ(ErrorOf(text), std::string(kFile) + ":" + c.error) << c.schedule;
  }
}

TEST(ParseJobSpec, ChecksDataAndEval) {
  struct Case {
    std::string extra;
    std::string error;
  };
  const Case cases[] = {
      {"data { kind: MNIST loader_threads: -1 }",
       "6:20: data.loader_threads must be >= 0, got -1"},
      {"data { prefetch: -2 }", "6:8: data.prefetch must be >= 0, got -2"},
      {"data { train_limit: -2 }",
       "6:8: data.train_limit must be >= 0, got -2"},
      {"data { kind: CIFAR10 synthetic { classes: 3 } }",
       "6:22: data.synthetic applies only to SYNTHETIC, got kind CIFAR10"},
      {"data { synthetic { shape: [3, 0, 32] } }",
       "6:20: data.synthetic.shape[1] must be > 0, got 0"},
      {"data { synthetic { shape: 3 shape: -1 } }",
       "6:29: data.synthetic.shape[1] must be > 0, got -1"},
      {"data { synthetic { classes: 1 } }",
       "6:20: data.synthetic.classes must be >= 2, got 1"},
      {"data { synthetic { train_samples: -1 } }",
       "6:20: data.synthetic.train_samples must be >= 0, got -1"},
      {"data { synthetic { noise: -1 } }",
       "6:20: data.synthetic.noise must be >= 0, got -1"},
      {"eval { batch_size: -1 }", "6:8: eval.batch_size must be >= 0, got -1"},
      {"eval { every_steps: -1 }",
       "6:8: eval.every_steps must be >= 0, got -1"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(Valid(c.extra + "\n")),
              std::string(kFile) + ":" + c.error)
        << c.extra;
  }
  // The loader, not the spec, reports a missing data directory.
  EXPECT_EQ(ErrorOf(Valid("data { kind: MNIST }\n")), "OK");
}

// Validation-driven control.
TEST(ParseJobSpec, ChecksEarlyStoppingAndKeepBest) {
  struct Case {
    std::string extra;
    std::string error;
  };
  const Case cases[] = {
      {"eval { metric: \"f1\" }",
       "6:8: eval.metric \"f1\" is not a metric this job's evaluation gives: "
       "one of loss, accuracy, top5_accuracy"},
      {"eval { metric: \"r2\" }",
       "6:8: eval.metric \"r2\" is not a metric this job's evaluation gives: "
       "one of loss, accuracy, top5_accuracy"},
      {"eval { early_stopping_patience: -1 }",
       "6:8: eval.early_stopping_patience must be >= 0, got -1"},
      {"eval { min_delta: -0.5 }",
       "6:8: eval.min_delta must be finite and >= 0, got -0.5"},
      {"eval { disable: true early_stopping_patience: 3 }",
       "6:22: eval.early_stopping_patience needs evaluation, but eval.disable "
       "is set"},
      {"eval { disable: true }\ncheckpoint { dir: \"c\" keep_best: true }",
       "7:23: checkpoint.keep_best needs evaluation, but eval.disable is set"},
      {"mode: PS\neval { early_stopping_patience: 2 }",
       "7:8: eval.early_stopping_patience needs all-reduce mode (in PS mode "
       "the state lives on the shards and workers may evaluate apart)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(Valid(c.extra + "\n")),
              std::string(kFile) + ":" + c.error)
        << c.extra;
  }
  EXPECT_EQ(ErrorOf(Valid("eval { metric: \"top5_accuracy\" every_steps: 10 "
                          "early_stopping_patience: 3 min_delta: 0.001 }\n"
                          "checkpoint { dir: \"c\" keep_best: true }\n")),
            "OK");
  // Float targets (line 6), the eval block on line 7.
  const std::string regress =
      "name: \"t\"\nmodel { layers { linear { out_features: 4 } } }\n"
      "batch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n"
      "data { kind: NUMPY numpy { shape: 16 target_shape: 4 train_x: \"x\" "
      "train_y: \"y\" test_x: \"tx\" test_y: \"ty\" } }\n";
  EXPECT_EQ(ErrorOf(regress + "eval { metric: \"accuracy\" }\n"),
            std::string(kFile) +
                ":7:8: eval.metric \"accuracy\" is not a metric this job's "
                "evaluation gives: one of loss, mse, mae, r2");
  EXPECT_EQ(ErrorOf(regress + "eval { metric: \"r2\" }\n"), "OK");
  EXPECT_EQ(ErrorOf(regress +
                    "eval { metric: \"accuracy\" }\nloss: BCE_WITH_LOGITS\n"),
            "OK");
}

// The click-through-rate metrics: BCE_WITH_LOGITS on one float target.
TEST(ParseJobSpec, AcceptsAucAndNormalizedEntropyForBceOnOneTarget) {
  // Float targets of `target_shape` (line 6), the eval block on line 7.
  auto numpy = [](const std::string& target_shape) {
    return "name: \"t\"\nmodel { layers { linear { out_features: 1 } } }\n"
           "batch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n"
           "data { kind: NUMPY numpy { shape: 16 target_shape: " +
           target_shape +
           " train_x: \"x\" train_y: \"y\" test_x: \"tx\" test_y: \"ty\" } "
           "}\n";
  };
  const std::string bce = "loss: BCE_WITH_LOGITS\n";
  for (const char* metric : {"auc", "normalized_entropy"}) {
    const std::string eval = std::string("eval { metric: \"") + metric +
                             "\" early_stopping_patience: 2 }\n";
    EXPECT_EQ(ErrorOf(numpy("1") + eval + bce), "OK") << metric;
    EXPECT_EQ(ErrorOf(numpy("[1, 1]") + eval + bce), "OK") << metric;
    const std::string csv =
        "name: \"t\"\nmodel { layers { linear { out_features: 1 } } }\n"
        "batch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n"
        "data { kind: CSV csv { train: \"a.csv\" test: \"b.csv\" target: "
        "\"y\" features: 3 regression: true } }\n";
    EXPECT_EQ(ErrorOf(csv + eval + bce), "OK") << metric;
    const std::string why =
        " (auc and normalized_entropy need loss BCE_WITH_LOGITS and one float "
        "target per sample)";
    EXPECT_EQ(ErrorOf(numpy("4") + eval + bce),
              std::string(kFile) + ":7:8: eval.metric \"" + metric +
                  "\" is not a metric this job's evaluation gives: one of "
                  "loss, accuracy" +
                  why)
        << metric;
    EXPECT_EQ(ErrorOf(numpy("1") + eval),
              std::string(kFile) + ":7:8: eval.metric \"" + metric +
                  "\" is not a metric this job's evaluation gives: one of "
                  "loss, mse, mae, r2" +
                  why)
        << metric;
    EXPECT_EQ(ErrorOf(Valid(eval)),
              std::string(kFile) + ":6:8: eval.metric \"" + metric +
                  "\" is not a metric this job's evaluation gives: one of "
                  "loss, accuracy, top5_accuracy" +
                  why)
        << metric;
  }
}
TEST(ParseJobSpec, AcceptsBottleneckBlocksAndTheResnet50Zoo) {
  EXPECT_EQ(
      ErrorOf(WithLayers(
          "  layers { residual { out_channels: 8 bottleneck: true } }\n")),
      "OK");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "batch_size: 4\nepochs: 1\nmodel { zoo: \"resnet50\" }\n"
      "data { synthetic { shape: [3, 224, 224] } }\n"
      "optimizer { lr: 0.1 }\n",
      kFile);
  EXPECT_TRUE(spec.ok()) << spec.status();
}

TEST(ParseJobSpec, FillsOptimizerDefaultsPerKind) {
  auto parse = [](const std::string& optimizer) {
    return ParseJobSpec(
        "batch_size: 4\nepochs: 1\nmodel { layers { linear "
        "{ out_features: 10 } } }\n"
        "data { synthetic { shape: [4] } }\noptimizer { " +
            optimizer + " }\n",
        kFile);
  };
  absl::StatusOr<JobSpec> rms = parse("kind: RMSPROP lr: 0.01");
  ASSERT_TRUE(rms.ok()) << rms.status();
  EXPECT_FLOAT_EQ(rms->optimizer().alpha(), 0.99f);
  EXPECT_FLOAT_EQ(rms->optimizer().eps(), 1e-8f);
  EXPECT_EQ(rms->optimizer().beta1(), 0.0f);
  absl::StatusOr<JobSpec> lamb = parse("kind: LAMB lr: 0.01");
  ASSERT_TRUE(lamb.ok()) << lamb.status();
  EXPECT_FLOAT_EQ(lamb->optimizer().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(lamb->optimizer().eps(), 1e-6f);
  absl::StatusOr<JobSpec> lars = parse("kind: LARS lr: 0.01 momentum: 0.9");
  ASSERT_TRUE(lars.ok()) << lars.status();
  EXPECT_FLOAT_EQ(lars->optimizer().trust_coefficient(), 0.001f);
  EXPECT_EQ(lars->optimizer().eps(), 0.0f);
}

TEST(ParseJobSpec, RefusesLambAndLarsInPsMode) {
  for (const char* kind : {"LAMB", "LARS"}) {
    const std::string text =
        "batch_size: 4\nepochs: 1\nmode: PS\n"
        "model { layers { linear { out_features: 10 } } }\n"
        "data { synthetic { shape: [4] } }\n"
        "optimizer { kind: " +
        std::string(kind) + " lr: 0.01 }\n";
    EXPECT_EQ(ErrorOf(text),
              std::string(kFile) + ":6:13: optimizer.kind " + kind +
                  " needs all-reduce mode (its trust ratio takes norms over "
                  "whole tensors, which PS shards hold only pieces of)");
  }
}

TEST(ParseJobSpec, FillsDefaults) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "batch_size: 4\nepochs: 1\nseed: 77\n"
      "model { layers { conv2d { out_channels: 2 kernel: 3 } }\n"
      "        layers { batchnorm2d {} } layers { maxpool2d { kernel: 3 } }\n"
      "        layers { residual { out_channels: 4 } } }\n"
      "optimizer { kind: ADAM lr: 0.001 }\n",
      kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "job");
  EXPECT_EQ(spec->model().layers(0).conv2d().stride(), 1);
  EXPECT_FLOAT_EQ(spec->model().layers(1).batchnorm2d().eps(), 1e-5f);
  EXPECT_FLOAT_EQ(spec->model().layers(1).batchnorm2d().momentum(), 0.1f);
  EXPECT_EQ(spec->model().layers(2).maxpool2d().stride(), 3);
  EXPECT_EQ(spec->model().layers(3).residual().stride(), 1);
  EXPECT_FLOAT_EQ(spec->optimizer().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(spec->optimizer().beta2(), 0.999f);
  EXPECT_FLOAT_EQ(spec->optimizer().eps(), 1e-8f);
  EXPECT_EQ(spec->eval().batch_size(), 16);  // 4 x batch_size
  EXPECT_EQ(spec->data().loader_threads(), 1);
  EXPECT_EQ(spec->data().prefetch(), 2);
  const SyntheticSpec& y = spec->data().synthetic();
  EXPECT_EQ(std::vector<int64_t>(y.shape().begin(), y.shape().end()),
            (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(y.classes(), 10);
  EXPECT_EQ(y.train_samples(), 8192);
  EXPECT_EQ(y.test_samples(), 2048);
  EXPECT_FLOAT_EQ(y.noise(), 1.0f);
  EXPECT_EQ(y.seed(), 77u);
}

TEST(ParseJobSpec, KeepsExplicitValuesAndSkipsUnusedDefaults) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(Valid("data { kind: MNIST dir: \"/m\" prefetch: 5 }\n"
                         "eval { batch_size: 10 }\n"),
                   kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "t");
  EXPECT_EQ(spec->data().prefetch(), 5);
  EXPECT_EQ(spec->eval().batch_size(), 10);
  EXPECT_FALSE(spec->data().has_synthetic());
  EXPECT_FLOAT_EQ(spec->optimizer().beta1(), 0.0f);  // SGD: no Adam defaults
}

constexpr char kFullSpec[] = R"(
name: "cifar"
model { zoo: "resnet18_cifar" }
data { kind: CIFAR10 dir: "/data/cifar" train_limit: 1000 loader_threads: 2
       prefetch: 4 }
batch_size: 128
epochs: 30
max_steps: 5000
optimizer { kind: SGD lr: 0.1 momentum: 0.9 nesterov: true
            weight_decay: 0.0005 }
lr_schedule { kind: COSINE min_lr: 0.001 warmup_steps: 100 }
loss: CROSS_ENTROPY
seed: 42
eval { every_steps: 500 batch_size: 500 }
drop_last: true
)";

TEST(ParseJobSpec, FullSpecRoundTrips) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kFullSpec, kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->optimizer().kind(), OptimizerSpec::SGD);
  EXPECT_TRUE(spec->optimizer().nesterov());
  EXPECT_EQ(spec->lr_schedule().warmup_steps(), 100);
  std::string printed;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*spec, &printed));
  absl::StatusOr<JobSpec> again = ParseJobSpec(printed, "printed");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, *again))
      << printed;
  EXPECT_EQ(DescribeJobSpec(*spec),
            "job \"cifar\": model resnet18_cifar, data CIFAR10 (/data/cifar) "
            "first 1000, batch 128, 30 epochs or 5000 steps, SGD lr 0.1 "
            "momentum 0.9 nesterov wd 0.0005, schedule COSINE to 0.001 warmup "
            "100");
}

TEST(ParseJobSpec, NormalisedSpecParsesToItself) {
  // Defaults filled once must survive a second pass unchanged.
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "batch_size: 2\nmax_steps: 3\nmodel { zoo: \"mlp_mnist\" }\n"
      "optimizer { kind: ADAMW lr: 0.01 weight_decay: 0.01 }\n",
      kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string printed;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*spec, &printed));
  absl::StatusOr<JobSpec> again = ParseJobSpec(printed, "printed");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(*spec, *again));
  EXPECT_EQ(
      DescribeJobSpec(*spec),
      "job \"job\": model mlp_mnist, data SYNTHETIC [1, 28, 28] x10 classes, "
      "batch 2, 3 steps, ADAMW lr 0.01 wd 0.01 betas 0.9/0.999 eps "
      "1e-08, schedule CONSTANT");
}

TEST(LoadJobSpec, ReadsFileAndNamesItInErrors) {
  std::string path = ::testing::TempDir() + "/spec_test.textproto";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("batch_size: 0\n", f);
  std::fclose(f);
  absl::StatusOr<JobSpec> spec = LoadJobSpec(path);
  EXPECT_EQ(spec.status().message(),
            path + ":1:1: batch_size must be > 0, got 0");
  std::remove(path.c_str());
  spec = LoadJobSpec(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spec.status().message(),
            "cannot open job spec " + path + ": No such file or directory");
}

TEST(LoadJobSpec, RefusesWhatIsNotAShortTextFile) {
  absl::StatusOr<JobSpec> spec = LoadJobSpec("/dev/zero");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            "job spec /dev/zero is a character device, not a regular file");
  EXPECT_EQ(kMaxJobSpecBytes, 16 << 20);
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TEST(ParseJobSpec, ChecksCluster) {
  EXPECT_EQ(ErrorOf(Valid("cluster { min_workers: 3 max_workers: 2 }")),
            "jobs/x.textproto:6:26: cluster.max_workers must be >= "
            "min_workers, got 2");
  EXPECT_EQ(ErrorOf(Valid("cluster { heartbeat_interval_ms: -5 }")),
            "jobs/x.textproto:6:11: cluster.heartbeat_interval_ms must be "
            ">= 0, got -5");
  EXPECT_EQ(ErrorOf(Valid("cluster { allreduce_algorithm: \"tree\" }")),
            "jobs/x.textproto:6:11: cluster.allreduce_algorithm must be one "
            "of ring, ring_chunked, halving_doubling, bcube, got \"tree\"");
  EXPECT_EQ(ErrorOf(Valid("cluster { nccl_algorithm: \"ring\" }")),
            "jobs/x.textproto:6:11: cluster.nccl_algorithm must be flat or "
            "hierarchical, got \"ring\"");
}

// Protobuf would refuse to serialize such a spec for the workers.
TEST(ParseJobSpec, RefusesTextThatIsNotUtf8) {
  const std::string error = ErrorOf(Valid("data { dir: \"d\\377\" }"));
  EXPECT_NE(error.find("jobs/x.textproto:6:"), std::string::npos) << error;
  EXPECT_NE(error.find("data.dir is not valid UTF-8 text"), std::string::npos)
      << error;
}

TEST(ParseJobSpec, FillsClusterDefaults) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(Valid("cluster { min_workers: 2 }"), kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ClusterSpec& c = spec->cluster();
  EXPECT_EQ(c.min_workers(), 2);
  EXPECT_EQ(c.max_workers(), 2);
  EXPECT_EQ(c.heartbeat_interval_ms(), 1000);
  EXPECT_EQ(c.heartbeat_misses(), 3);
  EXPECT_EQ(c.bucket_bytes(), 25 << 20);
  EXPECT_EQ(c.allreduce_algorithm(), "halving_doubling");
  EXPECT_EQ(c.nccl_algorithm(), "flat");
}

// Gradient accumulation.
TEST(ParseJobSpec, ChecksGradientAccumulationSteps) {
  EXPECT_EQ(ErrorOf(Valid("gradient_accumulation_steps: 4\n")), "OK");
  EXPECT_EQ(ErrorOf(Valid("gradient_accumulation_steps: -2\n")),
            "jobs/x.textproto:6:1: gradient_accumulation_steps must be >= 0, "
            "got -2");
  EXPECT_EQ(ErrorOf(Valid("gradient_accumulation_steps: 100000\n")),
            "jobs/x.textproto:6:1: gradient_accumulation_steps must be <= "
            "65536, got 100000");
}

TEST(DescribeJobSpec, NamesAccumulation) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(Valid("gradient_accumulation_steps: 4\n"), kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(DescribeJobSpec(*spec), HasSubstr("batch 32 x 4 accumulated"));
  // 1 trains as 0 (off), so its checkpoints are the same job's.
  JobSpec one = *spec, off = *spec;
  one.set_gradient_accumulation_steps(1);
  off.clear_gradient_accumulation_steps();
  EXPECT_EQ(TrainingHash(one), TrainingHash(off));
  EXPECT_NE(TrainingHash(*spec), TrainingHash(off));
}

// A model imported from ONNX hashes as the SUM branches and ReLUs that
// builds before the block fusion wrote, so that their checkpoints resume;
// the text below is what such a build's `cohort import` wrote for two of
// torchvision's resnet18 blocks.
TEST(TrainingHash, ImportedResidualLayersHashAsTheBranchesTheyReplace) {
  constexpr char kStem[] = R"(
    layers { conv2d { out_channels: 64 kernel: 7 stride: 2 padding: 3
                      no_bias: true } name: "conv1" }
    layers { relu { } }
    layers { maxpool2d { kernel: 3 stride: 2 padding: 1 } })";
  constexpr char kBranches[] = R"(
    layers { branch { paths {
      layers { conv2d { out_channels: 64 kernel: 3 stride: 1 padding: 1
                        no_bias: true } name: "layer1.1.conv1" }
      layers { batchnorm2d { eps: 1e-05 momentum: 0.1 } name: "layer1.1.bn1" }
      layers { relu { } }
      layers { conv2d { out_channels: 64 kernel: 3 stride: 1 padding: 1
                        no_bias: true } name: "layer1.1.conv2" }
      layers { batchnorm2d { eps: 1e-05 momentum: 0.1 } name: "layer1.1.bn2" }
    } paths {} combine: SUM } }
    layers { relu { } }
    layers { branch { paths {
      layers { conv2d { out_channels: 128 kernel: 3 stride: 2 padding: 1
                        no_bias: true } name: "layer2.0.conv1" }
      layers { batchnorm2d { eps: 1e-05 momentum: 0.1 } name: "layer2.0.bn1" }
      layers { relu { } }
      layers { conv2d { out_channels: 128 kernel: 3 stride: 1 padding: 1
                        no_bias: true } name: "layer2.0.conv2" }
      layers { batchnorm2d { eps: 1e-05 momentum: 0.1 } name: "layer2.0.bn2" }
    } paths {
      layers { conv2d { out_channels: 128 kernel: 1 stride: 2 no_bias: true }
               name: "layer2.0.downsample.0" }
      layers { batchnorm2d { eps: 1e-05 momentum: 0.1 }
               name: "layer2.0.downsample.1" }
    } combine: SUM } }
    layers { relu { } })";
  constexpr char kResiduals[] = R"(
    layers { residual { out_channels: 64 stride: 1 } name: "layer1.1" }
    layers { residual { out_channels: 128 stride: 2 } name: "layer2.0" })";
  auto job = [](const std::string& layers, bool onnx) {
    JobSpec spec;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        layers, spec.mutable_model()));
    if (onnx) spec.mutable_model()->set_onnx("/models/resnet18.onnx");
    return spec;
  };
  const std::string branches = absl::StrCat(kStem, kBranches);
  const std::string residuals = absl::StrCat(kStem, kResiduals);
  EXPECT_EQ(TrainingHash(job(residuals, true)),
            TrainingHash(job(branches, true)));
  // The zoo's residual layers are hashed as they are.
  EXPECT_NE(TrainingHash(job(residuals, false)),
            TrainingHash(job(branches, false)));
  // Another block is another model.
  std::string wider = residuals;
  wider.replace(wider.find("128"), 3, "256");
  EXPECT_NE(TrainingHash(job(wider, true)), TrainingHash(job(branches, true)));
}

TEST(ParseJobSpec, LogDefaultsAndChecks) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(Valid("log { dir: \"/tmp/logs\" }\n"), kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->log().every_steps(), 1);
  EXPECT_EQ(ErrorOf(Valid("log { every_steps: -2 }\n")),
            "jobs/x.textproto:6:7: log.every_steps must be >= 0, got -2");
  // Where and how often logs are written leaves the mathematics alone: a
  // checkpoint resumes with other log settings.
  JobSpec other = *spec;
  other.mutable_log()->set_dir("/elsewhere");
  other.mutable_log()->set_every_steps(10);
  EXPECT_EQ(TrainingHash(other), TrainingHash(*spec));
}

}  // namespace
}  // namespace cohort
