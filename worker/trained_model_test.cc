#include "worker/trained_model.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr char kSpec[] = R"(
model { layers { linear { out_features: 8 } } layers { relu {} }
        layers { linear { out_features: 4 } } }
data { kind: SYNTHETIC synthetic { shape: 16 train_samples: 64 test_samples: 16 } }
batch_size: 8
epochs: 1
optimizer { lr: 0.1 }
)";

// 16 x 8 + 8 + 8 x 4 + 4 = 172 parameters; each of the four tensors is
// padded to 16 values in the flat buffer.
constexpr int64_t kPaddedParams = 128 + 16 + 32 + 16;

// A checkpoint of the model kSpec describes, as a training run writes it.
Checkpoint MakeCheckpoint(const std::string& spec = kSpec) {
  Checkpoint c;
  c.step = 12;
  c.metadata["job_spec"] = spec;
  c.tensors.push_back(
      {"params", {kPaddedParams}, std::vector<float>(kPaddedParams, 0.5f)});
  return c;
}

TEST(TrainedModel, RebuildsTheModelItsCheckpointRecords) {
  absl::StatusOr<TrainedModel> t = RebuildTrainedModel(MakeCheckpoint(), "ck");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->step, 12);
  EXPECT_EQ(t->source, "ck");
  EXPECT_EQ(t->input_shape, Shape({16}));
  EXPECT_EQ(t->model->output_shape(), Shape({4}));
}

// A spec edited to a larger model (checksums recomputed, so the file
// verifies) is refused before that model is allocated: it would otherwise
// abort in an allocation of tens of gigabytes.
TEST(TrainedModel, ASpecThatDoesNotMatchTheTensorsIsRefusedBeforeBuilding) {
  const Checkpoint c = MakeCheckpoint(absl::StrReplaceAll(
      kSpec, {{"out_features: 8", "out_features: 2000000000"}}));
  absl::StatusOr<TrainedModel> t = RebuildTrainedModel(c, "ck");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(t.status().message(),
            "ck: tensor params holds 192 values where the model it records "
            "needs 42000000016")
      << t.status();
  EXPECT_EQ(CheckRecordedModel(c, "ck").status(), t.status());
}

// `cohort train`'s memory estimate, for a model run forward: refused with
// the largest part named, before any of it is allocated.
TEST(TrainedModel, AModelLargerThanTheMemoryLeftIsRefused) {
  absl::StatusOr<TrainedModel> t =
      RebuildTrainedModel(MakeCheckpoint(), "ck", /*available_memory=*/1000);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(t.status().message());
  EXPECT_EQ(message.rfind("ck: layer ", 0), 0u) << message;
  EXPECT_NE(message.find("; its model needs "), std::string::npos) << message;
  EXPECT_NE(message.find("this machine has 1000 bytes available"),
            std::string::npos)
      << message;
  EXPECT_TRUE(RebuildTrainedModel(MakeCheckpoint(), "ck", 1 << 30).ok());
}

// Predict's own batch, not the spec's, sets the forward pass's size; each
// copy of the model counts.
TEST(TrainedModel, ForwardPassesLargerThanTheMemoryLeftAreRefused) {
  absl::StatusOr<TrainedModel> t =
      RebuildTrainedModel(MakeCheckpoint(), "ck", 1 << 30);
  ASSERT_TRUE(t.ok()) << t.status();
  const int64_t limit = 1 << 20;
  EXPECT_TRUE(CheckForwardMemory(*t, 8, 1, limit).ok());
  EXPECT_TRUE(CheckForwardMemory(*t, 4096, 1, limit).ok());
  const absl::Status big = CheckForwardMemory(*t, 1 << 20, 1, limit);
  EXPECT_EQ(big.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(big.message());
  EXPECT_EQ(message.rfind("--batch=1048576: layer ", 0), 0u) << message;
  EXPECT_NE(message.find("this machine has 1.0 MiB available"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("; a smaller --batch needs less"), std::string::npos)
      << message;
  const absl::Status copies = CheckForwardMemory(*t, 4096, 8, limit);
  EXPECT_EQ(copies.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      std::string(copies.message()).rfind("--batch=4096 on 8 copies: ", 0), 0u)
      << copies;
}

TEST(TrainedModel, ACheckpointWithoutAUsableSpecIsRefused) {
  Checkpoint c = MakeCheckpoint();
  c.metadata.erase("job_spec");
  EXPECT_EQ(CheckRecordedModel(c, "ck").status().code(),
            absl::StatusCode::kFailedPrecondition);
  c.metadata["job_spec"] = "model { no_such_field: 1 }";
  EXPECT_EQ(CheckRecordedModel(c, "ck").status().code(),
            absl::StatusCode::kInvalidArgument);
  c = MakeCheckpoint();
  c.tensors.clear();
  EXPECT_EQ(CheckRecordedModel(c, "ck").status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cohort
