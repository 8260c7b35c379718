// The recommendation models' kinds (common/layer_kinds/slice.cc,
// embedding_bag.cc, interaction.cc) in a spec: a DLRM's sizes, and each
// field or input that does not fit pointing into the file.
#include <string>
#include <vector>

#include "common/model_sizes.h"
#include "common/spec_test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// 13 dense features and 26 ids (two floats each) per sample.
constexpr char kRows[] =
    "[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, "
    "1400, 1500, 1600, 1700, 1800, 1900, 2000, 2100, 2200, 2300, 2400, 2500, "
    "16777225]";

std::string Dlrm() {
  return std::string(
             "  layers { branch { combine: CONCAT\n"
             "    paths { layers { slice { begin: 0 end: 13 } }\n"
             "            layers { linear { out_features: 32 } }\n"
             "            layers { relu {} }\n"
             "            layers { linear { out_features: 16 } } }\n"
             "    paths { layers { slice { begin: 13 end: 65 } }\n"
             "            layers { embedding_bag { dim: 16 rows: ") +
         kRows +
         " } } } } }\n"
         "  layers { interaction { kind: DOT dim: 16 } }\n"
         "  layers { linear { out_features: 1 } }\n";
}

TEST(RecsysLayers, DlrmSizes) {
  ModelSpec model;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(Dlrm(), &model));
  const std::vector<LayerSpec> layers(model.layers().begin(),
                                      model.layers().end());
  const absl::StatusOr<ModelSizes> sizes = InferModelSizes(layers, {65});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  ASSERT_EQ(sizes->layers.size(), 3u);
  // 16 from the bottom MLP and 26 x 16 from the tables.
  EXPECT_EQ(sizes->layers[0].output, (Shape{16 + 26 * 16}));
  // The first vector and 27 x 26 / 2 pairs.
  EXPECT_EQ(sizes->layers[1].output, (Shape{16 + 351}));
  EXPECT_EQ(sizes->layers[2].output, (Shape{1}));
  const LayerSizes& branch = sizes->layers[0];
  // Two linear layers' (weight, bias), then one table per feature.
  ASSERT_EQ(branch.param_tensors.size(), 4u + 26u);
  EXPECT_EQ(branch.param_tensors[0], 32 * 13);
  EXPECT_EQ(branch.param_tensors[4], 100 * 16);
  EXPECT_EQ(branch.param_tensors[29], 16777225 * 16);
  // Tables, like token embeddings, are out of weight decay; the MLP's
  // weights are not.
  EXPECT_FALSE(branch.param_no_decay[0]);
  EXPECT_TRUE(branch.param_no_decay[1]);
  for (size_t t = 4; t < 30; ++t) EXPECT_TRUE(branch.param_no_decay[t]) << t;
  EXPECT_TRUE(sizes->layers[1].param_tensors.empty());
}

TEST(RecsysLayers, CatKeepsTheVectors) {
  LayerSpec l;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "interaction { kind: CAT dim: 4 }", &l));
  const absl::StatusOr<ModelSizes> sizes = InferModelSizes({l}, {12});
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(sizes->layers[0].output, (Shape{12}));
}

// Samples of shape [65] (line 4 is the first layer).
std::string With(const std::string& layers, const std::string& shape = "65") {
  return "batch_size: 8\nmax_steps: 10\nmodel {\n" + layers +
         "}\noptimizer { lr: 0.01 }\n"
         "data { kind: SYNTHETIC synthetic { shape: [" +
         shape + "] classes: 2 } }\n";
}

TEST(RecsysLayers, ADlrmSpecParses) { EXPECT_EQ(ErrorOf(With(Dlrm())), "OK"); }

TEST(RecsysLayers, RefusalsPointIntoTheFile) {
  struct Case {
    std::string layers;
    std::string error;
  };
  const Case cases[] = {
      {"  layers { slice { begin: -1 end: 3 } }\n",
       "4:20: model.layers[0].slice.begin must be >= 0, got -1"},
      {"  layers { slice { begin: 5 } }\n",
       "4:12: model.layers[0].slice.end must be > begin (5), got 0 (missing)"},
      {"  layers { slice { begin: 6 end: 6 } }\n",
       "4:29: model.layers[0].slice.end must be > begin (6), got 6"},
      {"  layers { slice { begin: 13 end: 70 } }\n",
       "4:3: layer 0 (slice) cannot take input of shape [65]: features [13, "
       "70) are not a non-empty range of the input's 65 (0 <= begin < end "
       "<= 65)"},
      {"  layers { embedding_bag { dim: 4 } }\n",
       "4:12: model.layers[0].embedding_bag.rows must list each categorical "
       "feature's table rows, got none (missing)"},
      {"  layers { embedding_bag { rows: [10, 0] dim: 4 } }\n",
       "4:28: model.layers[0].embedding_bag.rows[1] must be in [1, 2^48], got "
       "0"},
      {"  layers { embedding_bag { rows: [10] } }\n",
       "4:12: model.layers[0].embedding_bag.dim must be > 0, got 0 (missing)"},
      {"  layers { embedding_bag { rows: [10, 10] dim: 4 } }\n",
       "4:3: layer 0 (embedding_bag) cannot take input of shape [65]: its 2 "
       "tables read a flat input [4] (a pair of floats per categorical "
       "feature's row id)"},
      {"  layers { interaction { kind: DOT } }\n",
       "4:12: model.layers[0].interaction.dim must be > 0, got 0 (missing)"},
      {"  layers { interaction { dim: 16 } }\n",
       "4:3: layer 0 (interaction) cannot take input of shape [65]: it reads "
       "a flat input of 1 + T vectors of dim 16 features: [dim (1 + T)]"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(With(c.layers)), std::string(kFile) + ":" + c.error)
        << c.layers;
  }
  EXPECT_EQ(ErrorOf(With("  layers { slice { begin: 0 end: 13 } }\n", "5, 13")),
            std::string(kFile) +
                ":4:3: layer 0 (slice) cannot take input of shape [5, 13]: it "
                "takes features of a flat input [F]; put a flatten layer "
                "before it");
}

}  // namespace
}  // namespace cohort
