// Resume is exact: a run interrupted after K steps and resumed from its
// newest checkpoint ends with bit-identical parameters to a run of the same
// job straight through, whether the checkpoint is the newest or (after the
// newest is corrupted) the one before, with momentum or Adam, BatchNorm
// statistics and dropout. Checkpoints from another job are refused.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/own_data.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

constexpr char kSynthetic[] =
    "data { kind: SYNTHETIC synthetic { shape: 20 train_samples: 512 "
    "test_samples: 64 } }\n";

JobSpec Spec(const std::string& optimizer, uint64_t seed = 3,
             const std::string& data = kSynthetic,
             const std::string& first_layers = "") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat("model { ", first_layers,
                   "layers { linear { out_features: 32 } }\n"
                   "        layers { batchnorm1d {} } layers { relu {} }\n"
                   "        layers { dropout { p: 0.2 } }\n"
                   "        layers { linear { out_features: 10 } } }\n",
                   data,
                   "batch_size: 16\nepochs: 2\n"
                   "optimizer { ",
                   optimizer,
                   " }\nlr_schedule { kind: COSINE }\n"
                   "checkpoint { every_steps: 5 keep: 2 }\n"
                   "seed: ",
                   seed, "\n"),
      "resume.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Trains with 2 replicas; `stop` > 0 interrupts after that many steps.
absl::StatusOr<std::vector<float>> TrainFor(const JobSpec& spec,
                                            const std::string& dir,
                                            int64_t stop) {
  TrainOptions o;
  o.quiet = true;
  o.replicas = 2;
  o.threads = 2;
  o.checkpoint_dir = dir;
  o.stop_after_steps = stop;
  std::vector<float> params;
  o.final_parameters = &params;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  if (!r.ok()) return r.status();
  return params;
}

void ExpectExactResume(const std::string& optimizer, bool corrupt_newest,
                       const std::string& data = kSynthetic,
                       const std::string& first_layers = "") {
  const JobSpec spec = Spec(optimizer, 3, data, first_layers);
  auto straight = TrainFor(spec, FreshDir("straight"), 0);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const std::string dir = FreshDir("resumed");
  // 32 steps in all (16 per epoch); checkpoints at 5 and 10, then stopped
  // at 13: the resumed run redoes 11-13, mid-epoch.
  auto first = TrainFor(spec, dir, 13);
  ASSERT_EQ(first.status().code(), absl::StatusCode::kCancelled)
      << first.status();
  if (corrupt_newest) {
    const std::string newest = dir + "/ckpt-000000000010.cohort";
    ASSERT_TRUE(std::filesystem::exists(newest));
    FILE* f = std::fopen(newest.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 300, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, 300, SEEK_SET);
    std::fputc(c ^ 0x10, f);
    std::fclose(f);
  }
  auto resumed = TrainFor(spec, dir, 0);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->size(), straight->size());
  EXPECT_EQ(*resumed, *straight);
}

TEST(CheckpointResume, SgdMomentumIsExact) {
  ExpectExactResume("kind: SGD lr: 0.05 momentum: 0.9", false);
}

TEST(CheckpointResume, AdamIsExact) {
  ExpectExactResume("kind: ADAM lr: 0.003", false);
}

// The state of RMSprop, LAMB and LARS (RMSprop's averages and buffer,
// LAMB's moments and step count, LARS's buffer) resumes exactly too, with
// biases and norm parameters excluded from decay, on a model large enough
// that its tensors cross the two replicas' slices.
constexpr char kWide[] =
    "layers { linear { out_features: 96 } } layers { relu {} }\n";

TEST(CheckpointResume, RmspropIsExact) {
  ExpectExactResume(
      "kind: RMSPROP lr: 0.001 momentum: 0.5 centered: true "
      "weight_decay: 0.01 no_decay_bias_and_norm: true",
      false, kSynthetic, kWide);
}

TEST(CheckpointResume, AdagradIsExact) {
  ExpectExactResume(
      "kind: ADAGRAD lr: 0.01 lr_decay: 0.01 initial_accumulator_value: 0.1 "
      "weight_decay: 0.01 no_decay_bias_and_norm: true",
      false, kSynthetic, kWide);
}

TEST(CheckpointResume, LambIsExact) {
  ExpectExactResume(
      "kind: LAMB lr: 0.01 weight_decay: 0.01 no_decay_bias_and_norm: true",
      false, kSynthetic, kWide);
}

TEST(CheckpointResume, LarsIsExact) {
  ExpectExactResume("kind: LARS lr: 0.5 momentum: 0.9 weight_decay: 0.0005",
                    false, kSynthetic, kWide);
}

// A model smaller than two norm pieces leaves one replica's slice empty:
// LAMB's step count must still be right after a resume.
TEST(CheckpointResume, LambOnASmallModelIsExact) {
  ExpectExactResume("kind: LAMB lr: 0.01", false);
}

TEST(CheckpointResume, CorruptNewestFallsBackToThePreviousAndIsExact) {
  ExpectExactResume("kind: SGD lr: 0.05 momentum: 0.9", true);
}

TEST(CheckpointResume, AnotherJobsCheckpointsAreRefused) {
  const std::string dir = FreshDir("other");
  ASSERT_EQ(TrainFor(Spec("kind: SGD lr: 0.05", 3), dir, 7).status().code(),
            absl::StatusCode::kCancelled);
  auto other = TrainFor(Spec("kind: SGD lr: 0.05", 4), dir, 0);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr(dir));
}

// Gradient accumulation (3 batches a step; each replica's 350
// samples make 22 batches, so every epoch ends on a step of one batch of
// 14) and both kinds of clipping resume exactly: checkpoints fall between
// optimizer steps, never between accumulated batches.
TEST(CheckpointResume, AccumulationAndClippingAreExact) {
  ExpectExactResume(
      "kind: SGD lr: 0.05 momentum: 0.9 clip_grad_norm: 0.5 "
      "clip_grad_value: 0.05",
      false,
      "data { kind: SYNTHETIC synthetic { shape: 20 train_samples: 700 "
      "test_samples: 64 } }\ngradient_accumulation_steps: 3\n");
}

// Your own data: resume keeps the exact position in a NUMPY set
// of two shards and in a CSV table as well.
TEST(CheckpointResume, NumpyDataIsExact) {
  ExpectExactResume("kind: SGD lr: 0.05 momentum: 0.9", false,
                    NumpyDataBlock(FreshDir("npy_data")));
}

// Float targets under the Huber loss resume exactly too.
TEST(CheckpointResume, FloatTargetsAreExact) {
  ExpectExactResume(
      "kind: ADAM lr: 0.003", false,
      NumpyRegressionBlock(FreshDir("npy_regression")) + "loss: HUBER\n");
}

TEST(CheckpointResume, CsvDataIsExact) {
  const std::string dir = FreshDir("csv_data");
  std::filesystem::create_directories(dir);
  WriteCsv(dir + "/train.csv", 0, 512);
  WriteCsv(dir + "/test.csv", 512, 64);
  ExpectExactResume(
      "kind: ADAM lr: 0.003", false,
      absl::StrCat("data { kind: CSV dir: \"", dir,
                   "\" csv { train: \"train.csv\" test: \"test.csv\" "
                   "target: \"label\" classes: 10 features: 20 "
                   "standardize: true } }\n"));
}

// Image folders: the resumed run replays the same random crops and flips
// (drawn from the epoch's seed and the sample's index), so it is exact too.
TEST(CheckpointResume, ImageFolderDataIsExact) {
  ExpectExactResume("kind: SGD lr: 0.05 momentum: 0.9", false,
                    ImageFolderDataBlock(FreshDir("image_data")),
                    "layers { flatten {} }\n");
}

}  // namespace
}  // namespace cohort
