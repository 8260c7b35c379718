// The checks of a spec's data block and of the loss against the targets
// (common/spec_data.cc, common/spec.cc's CheckLoss).
#include <string>

#include "common/spec.h"
#include "common/spec_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

// Kind NUMPY: the block, its shape and classes, and one label file per
// input file are checked before any file is opened.
TEST(ParseJobSpec, ChecksNumpyData) {
  const std::string model =
      "name: \"t\"\nmodel { layers { linear { out_features: 4 } } }\n"
      "batch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n";
  EXPECT_EQ(ErrorOf(model + "data { kind: NUMPY numpy { shape: 16 classes: 4 "
                            "train_x: \"x\" train_y: \"y\" test_x: \"tx\" "
                            "test_y: \"ty\" } }\n"),
            "OK");
  EXPECT_THAT(ErrorOf(model + "data { kind: NUMPY }\n"),
              HasSubstr("kind NUMPY needs a numpy { shape classes"));
  EXPECT_THAT(ErrorOf(model + "data { kind: NUMPY numpy { classes: 4 "
                              "train_x: \"x\" train_y: \"y\" test_x: "
                              "\"tx\" test_y: \"ty\" } }\n"),
              HasSubstr("data.numpy.shape must be the per-sample shape"));
  EXPECT_THAT(ErrorOf(model + "data { kind: NUMPY numpy { shape: 16 classes: "
                              "1 train_x: \"x\" train_y: \"y\" test_x: "
                              "\"tx\" test_y: \"ty\" } }\n"),
              HasSubstr("data.numpy.classes must be >= 2 (or target_shape for "
                        "float targets), got 1"));
  EXPECT_THAT(ErrorOf(model + "data { kind: NUMPY numpy { shape: 16 classes: "
                              "4 train_x: \"x\" train_x: \"x2\" train_y: "
                              "\"y\" test_x: \"tx\" test_y: \"ty\" } }\n"),
              HasSubstr("data.numpy.train_y must be one file per train_x file "
                        "(2), got 1"));
  EXPECT_THAT(ErrorOf(model + "data { kind: MNIST numpy { shape: 16 } }\n"),
              HasSubstr("applies only to NUMPY, got kind MNIST"));
}

TEST(ParseJobSpec, ChecksCsvData) {
  const std::string model =
      "name: \"t\"\nmodel { layers { linear { out_features: 4 } } }\n"
      "batch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n";
  EXPECT_EQ(ErrorOf(model + "data { kind: CSV csv { train: \"a.csv\" test: "
                            "\"b.csv\" target: \"y\" classes: 2 features: "
                            "3 } }\n"),
            "OK");
  EXPECT_THAT(ErrorOf(model + "data { kind: CSV }\n"),
              HasSubstr("kind CSV needs a csv { train test target"));
  EXPECT_THAT(ErrorOf(model + "data { kind: CSV csv { train: \"a.csv\" test: "
                              "\"b.csv\" classes: 2 features: 3 } }\n"),
              HasSubstr("data.csv.target must be the name of the target "
                        "column"));
  EXPECT_THAT(ErrorOf(model + "data { kind: CSV csv { train: \"a.csv\" test: "
                              "\"b.csv\" target: \"y\" classes: 2 } }\n"),
              HasSubstr("data.csv.features must be >= 1"));
}

// Float targets choose MSE by default; cross-entropy is refused on them,
// and the settings of one loss are refused on another.
TEST(ParseJobSpec, ChecksTheLossAgainstTheTargets) {
  const std::string base =
      "name: \"t\"\nmodel { layers { flatten {} } layers { linear { "
      "out_features: 1 } } }\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 "
      "}\n";
  const std::string floats =
      "data { kind: NUMPY numpy { shape: 16 target_shape: 1 train_x: \"x\" "
      "train_y: \"y\" test_x: \"tx\" test_y: \"ty\" } }\n";
  absl::StatusOr<JobSpec> spec = ParseJobSpec(base + floats, kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->loss(), MSE);
  spec = ParseJobSpec(base, kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->loss(), CROSS_ENTROPY);
  spec = ParseJobSpec(base + floats + "loss: HUBER\n", kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->huber_delta(), 1.0f);
  EXPECT_THAT(ErrorOf(base + floats + "loss: CROSS_ENTROPY\n"),
              HasSubstr("x.textproto:7:1: loss CROSS_ENTROPY needs class "
                        "labels, but the data has float targets"));
  EXPECT_THAT(ErrorOf(base + floats + "label_smoothing: 0.1\n"),
              HasSubstr("label_smoothing applies only to CROSS_ENTROPY, got "
                        "kind MSE"));
  EXPECT_THAT(ErrorOf(base + "label_smoothing: 1\n"),
              HasSubstr("label_smoothing must be in [0, 1), got 1"));
  EXPECT_THAT(ErrorOf(base + "loss: L1 huber_delta: 2\n"),
              HasSubstr("huber_delta applies only to HUBER, got kind L1"));
  EXPECT_THAT(ErrorOf(base + floats + "loss_weights: [1, 2]\n"),
              HasSubstr("loss_weights applies only to CROSS_ENTROPY"));
  EXPECT_THAT(ErrorOf(base + "loss_weights: [1, -2]\n"),
              HasSubstr("loss_weights[1] must be finite and >= 0, got -2"));
  EXPECT_THAT(ErrorOf(base + "loss_weights: [0, 0]\n"),
              HasSubstr("loss_weights must not all be 0"));
  EXPECT_THAT(
      ErrorOf(base + "loss_weights: 1 label_smoothing: 0.1\n"),
      HasSubstr("loss_weights cannot be combined with label_smoothing"));
  EXPECT_THAT(ErrorOf(base + "ignore_index: -100\n"),
              HasSubstr("ignore_index must be >= 0 (a class id), got -100"));
  EXPECT_TRUE(
      ParseJobSpec(base + "loss_weights: [1, 2] ignore_index: 0\n", kFile)
          .ok());
  EXPECT_THAT(ErrorOf(base + "data { kind: NUMPY numpy { shape: 16 "
                             "target_shape: 1 classes: 3 train_x: \"x\" "
                             "train_y: \"y\" test_x: \"tx\" test_y: "
                             "\"ty\" } }\n"),
              HasSubstr("data.numpy.classes must be 0 with float targets"));
  EXPECT_THAT(ErrorOf(base + "data { kind: CSV csv { train: \"a\" test: "
                             "\"b\" target: \"y\" regression: true "
                             "classes: 2 features: 3 } }\n"),
              HasSubstr("data.csv.classes must be 0 with regression: true"));
}

// Kind TOKENS and the transformer layers: each field checked where it is
// written, the defaults filled, and the loss and metrics a language model
// has.
TEST(ParseJobSpec, ChecksTokenDataAndTransformerLayers) {
  const std::string head =
      "name: \"t\"\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n";
  auto job = [&](const std::string& tokens, const std::string& layer) {
    return head +
           "data { kind: TOKENS\n"  // 5
           "tokens { " +
           tokens +  // 6
           " } }\n"
           "model { layers { embedding { vocab_size: 256 dim: 8 } }\n"  // 7
           "layers { " +
           layer +  // 8
           " }\n"
           "layers { tied_lm_head {} } }\n";  // 9
  };
  const std::string block = "transformer_block { heads: 2 }";
  EXPECT_EQ(ErrorOf(job("train: \"a.txt\" context: 16", block)), "OK");
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(job("train: \"a.txt\" context: 16", block), kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data().tokens().vocab_size(), 256);
  EXPECT_EQ(spec->data().tokens().stride(), 16);
  EXPECT_FLOAT_EQ(spec->data().tokens().val_fraction(), 0.1f);
  EXPECT_EQ(spec->loss(), CROSS_ENTROPY);
  EXPECT_EQ(ErrorOf(job("context: 16", block)),
            "jobs/x.textproto:6:1: data.tokens.train must be the training "
            "file (text, .bin or .npy), got none (missing)");
  EXPECT_EQ(ErrorOf(job("train: \"a\" context: 0", block)),
            "jobs/x.textproto:6:21: data.tokens.context must be in [1, "
            "1048576], got 0");
  EXPECT_EQ(ErrorOf(job("train: \"a\" context: 4 format: UINT16", block)),
            "jobs/x.textproto:6:1: data.tokens.vocab_size must be in [2, "
            "16777216] for UINT16 and UINT32 ids, got 0 (missing)");
  EXPECT_EQ(ErrorOf(job("train: \"a\" test: \"b\" val_fraction: 0.2 "
                        "context: 4",
                        block)),
            "jobs/x.textproto:6:31: data.tokens.val_fraction applies only to "
            "no test file, got kind a test file");
  EXPECT_EQ(
      ErrorOf(job("train: \"a\" context: 4", "transformer_block { heads: 0 }")),
      "jobs/x.textproto:8:30: model.layers[1].transformer_block.heads "
      "must be > 0, got 0");
  EXPECT_EQ(ErrorOf(job("train: \"a\" context: 4", "attention { heads: 3 }")),
            "jobs/x.textproto:8:1: layer 1 (attention) cannot take input "
            "of shape [8, 4]: heads (3) must divide the features (8)");
  EXPECT_EQ(ErrorOf(job("train: \"a\" context: 4", block) + "loss: MSE\n"),
            "jobs/x.textproto:10:1: loss must be CROSS_ENTROPY for TOKENS "
            "data (next-token prediction), got MSE");
  EXPECT_EQ(ErrorOf(job("train: \"a\" context: 4", block) +
                    "eval { metric: \"perplexity\" }\n"),
            "OK");
  // The embedding must have a row for every id the data can hold, and only
  // TOKENS data holds ids.
  EXPECT_EQ(ErrorOf(job("train: \"a\" context: 4 format: UINT16 "
                        "vocab_size: 300",
                        block)),
            "jobs/x.textproto:7:9: the embedding's vocab_size 256 is below "
            "the data's vocabulary (data.tokens.vocab_size 300): every id "
            "must have a row");
  EXPECT_EQ(
      ErrorOf(head +
              "data { kind: NUMPY numpy { shape: [1, 4] classes: 3 "
              "train_x: \"x\" train_y: \"y\" test_x: \"x\" test_y: \"y\" } }\n"
              "model { layers { embedding { vocab_size: 256 dim: 8 } } "
              "layers { tied_lm_head {} } }\n"),
      "jobs/x.textproto:6:9: the embedding reads token ids, which only data "
      "kind TOKENS gives, not NUMPY");
}

// Kind IMAGE_FOLDER: each field checked where it is written, the sample
// shape known from the spec alone (a zoo model is matched against it), and
// the documented defaults filled in.
TEST(ParseJobSpec, ChecksImageFolderData) {
  const std::string head =
      "name: \"t\"\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n";
  const std::string cifar = head + "model { zoo: \"lenet_cifar\" }\n";
  auto data = [&](const std::string& block) {
    return cifar + "data { kind: IMAGE_FOLDER dir: \"/d\"\n" + block + "\n}\n";
  };
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32 }")), "OK");
  EXPECT_EQ(ErrorOf(data("")),
            "jobs/x.textproto:6:1: data.image_folder kind IMAGE_FOLDER needs "
            "an image_folder { classes } block (missing)");
  EXPECT_EQ(ErrorOf(data("image_folder { image_size: 32 }")),
            "jobs/x.textproto:7:1: data.image_folder.classes must be >= 2 "
            "(the number of class folders), got 0 (missing)");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10\n image_size: -3 }")),
            "jobs/x.textproto:8:2: data.image_folder.image_size must be in "
            "[1, 4096], got -3");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "resize: 31 }")),
            "jobs/x.textproto:8:2: data.image_folder.resize must be in "
            "[image_size (32), 16384], got 31");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "val_fraction: 1 }")),
            "jobs/x.textproto:8:2: data.image_folder.val_fraction must be in "
            "[0, 1), got 1");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "mean: [0.5, 0.5] }")),
            "jobs/x.textproto:8:2: data.image_folder.mean must hold 1 or 3 "
            "values (one per channel), got 2");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "std: [0.5, 0, 0.5] }")),
            "jobs/x.textproto:8:2: data.image_folder.std[1] must be > 0, "
            "got 0");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "scale_min: 0.5 scale_max: 0.25 }")),
            "jobs/x.textproto:8:17: data.image_folder.scale_max must be >= "
            "scale_min (0.5), got 0.25");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "scale_min: 1.5 }")),
            "jobs/x.textproto:8:2: data.image_folder.scale_min must be in "
            "(0, 1], got 1.5");
  EXPECT_EQ(ErrorOf(data("image_folder { classes: 10 image_size: 32\n "
                         "ratio_max: -1 }")),
            "jobs/x.textproto:8:2: data.image_folder.ratio_max must be in "
            "(0, 100], got -1");
  EXPECT_THAT(ErrorOf(cifar + "data { kind: CSV image_folder { classes: 2 } "
                              "csv { train: \"a\" test: \"b\" target: \"y\" "
                              "classes: 2 features: 3 } }\n"),
              HasSubstr("data.image_folder applies only to IMAGE_FOLDER, got "
                        "kind CSV"));
  // The shape {3, 224, 224} (the default size) does not fit lenet_cifar;
  // grayscale gives one channel.
  EXPECT_THAT(ErrorOf(data("image_folder { classes: 10 }")),
              HasSubstr("zoo model lenet_cifar takes samples of shape [3, 32, "
                        "32] but the data set gives [3, 224, 224]"));
  EXPECT_THAT(
      ErrorOf(head + "model { zoo: \"lenet5\" }\ndata { kind: IMAGE_FOLDER "
                     "image_folder { classes: 10 image_size: 28 grayscale: "
                     "true } }\n"),
      "OK");
}

TEST(ParseJobSpec, FillsImageFolderDefaults) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "model { zoo: \"resnet50\" } batch_size: 8 epochs: 1 optimizer { lr: "
      "0.1 } data { kind: IMAGE_FOLDER image_folder { classes: 5 std: 0.5 } "
      "}",
      kFile);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ImageFolderSpec& f = spec->data().image_folder();
  EXPECT_EQ(f.train(), "train");
  EXPECT_EQ(f.val(), "val");
  EXPECT_EQ(f.image_size(), 224);
  EXPECT_EQ(f.resize(), 256);
  ASSERT_EQ(f.mean_size(), 3);
  EXPECT_FLOAT_EQ(f.mean(0), 0.485f);
  EXPECT_FLOAT_EQ(f.mean(2), 0.406f);
  ASSERT_EQ(f.std_size(), 3);
  EXPECT_FLOAT_EQ(f.std(1), 0.5f);
  EXPECT_FLOAT_EQ(f.scale_min(), 0.08f);
  EXPECT_FLOAT_EQ(f.scale_max(), 1.0f);
  EXPECT_FLOAT_EQ(f.ratio_min(), 0.75f);
  EXPECT_FLOAT_EQ(f.ratio_max(), 4.0f / 3);
  EXPECT_FALSE(f.no_flip());
  // Idempotent: filling a filled spec changes nothing.
  ImageFolderSpec again = f;
  FillImageFolderDefaults(&again);
  EXPECT_EQ(again.SerializeAsString(), f.SerializeAsString());
}

// A CRITEO job's tables must hold every row the data's hashing can give.
TEST(ParseJobSpec, ChecksTablesAgainstCriteoRows) {
  auto job = [](const std::string& rows) {
    return "name: \"t\"\nmodel { zoo: \"dlrm_small\" }\nbatch_size: 8\n"
           "epochs: 1\noptimizer { kind: ADAGRAD lr: 0.1 }\n"
           "loss: BCE_WITH_LOGITS\n"
           "data { kind: CRITEO criteo { train: \"a.txt\" table_rows: " +
           rows + " } }\n";
  };
  EXPECT_EQ(ErrorOf(job("32768")), "OK");
  EXPECT_EQ(ErrorOf(job("1000")), "OK");  // more rows than ids: unused rows
  EXPECT_EQ(ErrorOf(job("65536")),
            "jobs/x.textproto:2:9: embedding_bag table 0 has 32768 rows, "
            "fewer than data.criteo.table_rows gives categorical feature 0 "
            "(65536): an id could fall past it; give the table as many rows");
}

TEST(ParseJobSpec, ChecksSparseTablesModeOptimizerAndAccumulation) {
  auto job = [](const std::string& mode, const std::string& optimizer,
                const std::string& extra = "") {
    return "name: \"t\"\nmodel { layers { embedding_bag { rows: 100 rows: "
           "50 dim: 4 sparse: true } } layers { flatten {} } layers { linear "
           "{ out_features: 1 } } }\nbatch_size: 8\nepochs: 1\noptimizer { " +
           optimizer +
           " }\nloss: BCE_WITH_LOGITS\ndata { kind: SYNTHETIC synthetic { "
           "shape: 4 classes: 2 } }\n" +
           mode + extra;
  };
  const std::string ps = "mode: PS\nps { shards: 2 }\n";
  EXPECT_EQ(ErrorOf(job(ps, "kind: ADAGRAD lr: 0.1")), "OK");
  EXPECT_EQ(ErrorOf(job(ps, "kind: ADAM lr: 0.1")), "OK");
  EXPECT_EQ(ErrorOf(job(ps, "kind: SGD lr: 0.1")), "OK");
  EXPECT_EQ(ErrorOf(job(ps,
                        "kind: ADAM lr: 0.1 weight_decay: 0.01 "
                        "no_decay_bias_and_norm: true")),
            "OK");
  EXPECT_THAT(ErrorOf(job("", "kind: ADAGRAD lr: 0.1")),
              HasSubstr("embedding_bag.sparse needs mode PS"));
  EXPECT_THAT(ErrorOf(job(ps, "kind: SGD lr: 0.1 momentum: 0.9")),
              HasSubstr("optimizer.kind cannot step the sparse embedding_bag "
                        "tables: SGD momentum has no row-wise step"));
  EXPECT_THAT(ErrorOf(job(ps, "kind: RMSPROP lr: 0.1")),
              HasSubstr("kind RMSPROP has no row-wise step"));
  EXPECT_THAT(ErrorOf(job(ps, "kind: ADAGRAD lr: 0.1 weight_decay: 0.01")),
              HasSubstr("weight_decay would decay every row"));
  EXPECT_THAT(ErrorOf(job(ps, "kind: ADAGRAD lr: 0.1",
                          "gradient_accumulation_steps: 2\n")),
              HasSubstr("gradient_accumulation_steps must be 0 or 1 with "
                        "sparse embedding_bag tables"));
}

}  // namespace
}  // namespace cohort
