#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/spec.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "worker/comm/test_ranks.h"

namespace cohort {
namespace {

JobSpec Spec(const std::string& text) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "test.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

constexpr char kSyntheticMlp[] = R"(
  name: "synthetic-mlp"
  model { zoo: "mlp_seed" }
  data { kind: SYNTHETIC synthetic { shape: 100 classes: 10 train_samples: 2048
         test_samples: 512 noise: 1.0 } }
  batch_size: 32
  epochs: 2
  optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
  seed: 7
)";

TEST(Trainer, LearnsTheSyntheticDataSet) {
  TrainOptions o;
  o.quiet = true;
  absl::StatusOr<TrainResult> r = Train(Spec(kSyntheticMlp), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->epochs, 2);
  EXPECT_EQ(r->steps, 2 * 64);
  EXPECT_EQ(r->samples, 2 * 2048);
  EXPECT_GT(r->test_accuracy, 0.9);
  EXPECT_LT(r->final_loss, r->epoch_results[0].train_loss);
  EXPECT_GT(r->samples_per_s, 0);
}

TEST(Trainer, MaxStepsStopsEarly) {
  TrainOptions o;
  o.quiet = true;
  o.max_steps = 10;
  absl::StatusOr<TrainResult> r = Train(Spec(kSyntheticMlp), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 10);
  EXPECT_EQ(r->samples, 320);
}

// Progress reaches the coordinator at most every 100 ms, but always before
// an evaluation, which waits for the other workers: a replacement PS shard
// learns from it that every worker pushed the steps before
// (server/ps/shard_state.h). Small models take far less than 100 ms an
// epoch.
TEST(Trainer, ReportsTheStepBeforeEachEvaluation) {
  absl::StatusOr<std::unique_ptr<LocalGroup>> group =
      LocalGroup::Connect(1, GlooOptions());
  ASSERT_TRUE(group.ok()) << group.status();
  JobSpec spec = Spec(kSyntheticMlp);
  spec.set_epochs(3);
  spec.mutable_data()->mutable_synthetic()->set_train_samples(256);
  spec.mutable_data()->mutable_synthetic()->set_test_samples(64);
  std::vector<int64_t> reported;
  DistributedContext d;
  d.comm = &(*group)->comm(0);
  d.epoch_seed = [&spec](int64_t) -> absl::StatusOr<uint64_t> {
    return spec.seed();
  };
  d.on_step = [&reported](const WorkerProgress& p) {
    reported.push_back(p.step());
    return absl::OkStatus();
  };
  TrainOptions o;
  o.quiet = true;
  o.distributed = &d;
  ASSERT_TRUE(Train(spec, o).ok());
  for (int64_t step : {8, 16, 24}) {
    EXPECT_NE(std::find(reported.begin(), reported.end(), step), reported.end())
        << "step " << step;
  }
}

// R replicas with batch b must follow the same trajectory as one replica
// with batch R*b: the sampler interleaves the same permutation and the
// gradients are averaged.
void ExpectReplicasMatchBigBatch(const std::string& model, int replicas) {
  JobSpec spec = Spec(kSyntheticMlp);
  spec.mutable_model()->set_zoo(model);
  if (model != "mlp_seed") {
    spec.mutable_data()->mutable_synthetic()->clear_shape();
    for (int64_t d : {3, 32, 32}) {
      spec.mutable_data()->mutable_synthetic()->add_shape(d);
    }
  }
  spec.set_batch_size(8);
  TrainOptions many;
  many.quiet = true;
  many.max_steps = 12;
  many.replicas = replicas;
  many.threads = replicas;
  std::vector<float> p_many, p_one;
  many.final_parameters = &p_many;
  ASSERT_TRUE(Train(spec, many).ok());

  spec.set_batch_size(8 * replicas);
  TrainOptions one = many;
  one.replicas = 1;
  one.threads = 1;
  one.final_parameters = &p_one;
  ASSERT_TRUE(Train(spec, one).ok());

  ASSERT_EQ(p_many.size(), p_one.size());
  // Relative to the parameters' scale: float sums in a different order
  // differ in the last bits, and training amplifies that a little.
  double diff = 0, scale = 0;
  for (size_t i = 0; i < p_one.size(); ++i) {
    diff = std::max(diff, std::abs(1.0 * p_many[i] - p_one[i]));
    scale = std::max(scale, std::abs(1.0 * p_one[i]));
  }
  EXPECT_LT(diff / scale, 1e-5) << model << " with " << replicas << " replicas";

  // The comparison can tell trajectories apart: one replica with the small
  // batch ends elsewhere.
  spec.set_batch_size(8);
  std::vector<float> p_small;
  one.final_parameters = &p_small;
  ASSERT_TRUE(Train(spec, one).ok());
  double other = 0;
  for (size_t i = 0; i < p_one.size(); ++i) {
    other = std::max(other, std::abs(1.0 * p_small[i] - p_one[i]));
  }
  EXPECT_GT(other / scale, 1e-3);
}

TEST(Trainer, TwoReplicasEqualOneWithTwiceTheBatchMlp) {
  ExpectReplicasMatchBigBatch("mlp_seed", 2);
}

TEST(Trainer, ThreeReplicasEqualOneWithThriceTheBatchLenet) {
  ExpectReplicasMatchBigBatch("lenet_cifar", 3);
}

// K accumulated batches of b per replica train as one batch of
// K*b, here on 2 replicas over 2 epochs of 2000 samples: each replica's
// 1000 make 63 batches of 16, the epoch's last step 3 of them (16 + 16 + 8
// samples) against one batch of 40, so partial steps weigh by their
// samples as a larger batch does. Also with clipping, on the step's
// gradient.
void ExpectAccumulationMatchesBigBatch(const std::string& optimizer) {
  JobSpec spec = Spec(kSyntheticMlp);
  spec.mutable_data()->mutable_synthetic()->set_train_samples(2000);
  ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(
      optimizer, spec.mutable_optimizer()));
  spec.set_batch_size(16);
  spec.set_gradient_accumulation_steps(4);
  TrainOptions o;
  o.quiet = true;
  o.replicas = 2;
  o.threads = 2;
  std::vector<float> p_acc, p_big, p_small;
  o.final_parameters = &p_acc;
  absl::StatusOr<TrainResult> acc = Train(spec, o);
  ASSERT_TRUE(acc.ok()) << acc.status();

  spec.set_batch_size(64);
  spec.set_gradient_accumulation_steps(0);
  o.final_parameters = &p_big;
  absl::StatusOr<TrainResult> big = Train(spec, o);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(acc->steps, big->steps);
  EXPECT_EQ(acc->steps, 2 * 16);
  EXPECT_EQ(acc->samples, big->samples);
  EXPECT_NEAR(acc->final_loss, big->final_loss, 1e-5 * big->final_loss);

  ASSERT_EQ(p_acc.size(), p_big.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < p_big.size(); ++i) {
    diff = std::max(diff, std::abs(1.0 * p_acc[i] - p_big[i]));
    scale = std::max(scale, std::abs(1.0 * p_big[i]));
  }
  EXPECT_LT(diff / scale, 1e-5) << optimizer;

  // Batches of 16 without accumulation end elsewhere.
  spec.set_batch_size(16);
  o.final_parameters = &p_small;
  ASSERT_TRUE(Train(spec, o).ok());
  double other = 0;
  for (size_t i = 0; i < p_big.size(); ++i) {
    other = std::max(other, std::abs(1.0 * p_small[i] - p_big[i]));
  }
  EXPECT_GT(other / scale, 1e-3);
}

TEST(Trainer, AccumulatedBatchesTrainAsOneLargerBatch) {
  ExpectAccumulationMatchesBigBatch("");
}

// Rounding differs between the two (sums in another order), so the runs
// agree to about 2e-7 here, not bit for bit; that is only true of a
// trajectory on which no ReLU input of any sample lands within rounding of
// zero. One that does switches that unit's gradient for that sample in one
// run and not the other (seen: with nesterov, weight decay and clipping
// together, 192 weights of one unit ended 4e-4 apart), as it would between
// any two orders of summation. And not Adam: where a gradient element is
// near zero its update is about lr x sign(g), so last-bit differences grow
// to lr within steps.
TEST(Trainer, AccumulatedBatchesTrainAsOneLargerBatchWithClipping) {
  ExpectAccumulationMatchesBigBatch("weight_decay: 1e-4 clip_grad_norm: 0.5");
}

// gpt_tiny at the batch the benchmarks train it with: its position-wise
// products (2048 tokens, 256 x 1024 weights) run on oneDNN's sgemm, whose
// own threads cut some of those sums and changed the trained bits between
// one thread and two. No kernel's sums may follow the thread count.
TEST(Trainer, TransformerTrainsToTheSameBitsOnOneAndTwoThreads) {
  const std::string corpus = ::testing::TempDir() + "gpt_bytes.bin";
  {
    std::ofstream out(corpus, std::ios::binary);
    for (int i = 0; i < 8192; ++i) out.put(static_cast<char>((i * 37) % 251));
  }
  JobSpec spec = Spec(R"(
    model { zoo: "gpt_tiny" }
    data { kind: TOKENS tokens { train: "bytes.bin" context: 256 } }
    batch_size: 8
    max_steps: 2
    optimizer { kind: ADAMW lr: 0.001 }
    eval { disable: true }
    seed: 3
  )");
  spec.mutable_data()->mutable_tokens()->set_train(corpus);
  std::vector<float> params[2];
  for (int threads : {1, 2}) {
    TrainOptions o;
    o.quiet = true;
    o.max_steps = 2;
    o.threads = threads;
    o.final_parameters = &params[threads - 1];
    absl::StatusOr<TrainResult> r = Train(spec, o);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_FALSE(params[0].empty());
  EXPECT_TRUE(params[0] == params[1]);
}

TEST(Trainer, ModelThatDoesNotFitTheDataIsRejected) {
  JobSpec spec = Spec(kSyntheticMlp);
  spec.mutable_model()->set_zoo("lenet5");
  TrainOptions o;
  o.quiet = true;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("lenet5"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("[100]"), std::string::npos)
      << r.status();
}

TEST(Trainer, Bf16OnCpuReplicasIsRefusedNamingTheFix) {
  JobSpec spec = Spec(std::string(kSyntheticMlp) + "precision: BF16\n");
  TrainOptions o;
  o.quiet = true;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--devices=gpu"), std::string::npos)
      << r.status();
}

// ParseJobSpec refuses such a spec already (common/model_sizes.h); the
// trainer must too, for a spec that reached it another way.
TEST(Trainer, InconsistentLayerShapesNameTheLayer) {
  JobSpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
    model { layers { linear { out_features: 50 } }
            layers { conv2d { out_channels: 4 kernel: 3 } } }
    data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 64
           test_samples: 16 } }
    batch_size: 8 epochs: 1 optimizer { lr: 0.1 })",
                                                            &spec));
  EXPECT_FALSE(ParseJobSpec(spec.DebugString(), "x").ok());
  TrainOptions o;
  o.quiet = true;
  absl::StatusOr<TrainResult> r = Train(spec, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("layer 1"), std::string::npos)
      << r.status();
}

// A model that cannot fit is refused before anything is allocated, with
// one line naming the layer and what the machine has.
TEST(Trainer, RefusesAJobLargerThanTheMachinesMemory) {
  JobSpec spec = Spec(R"(
    model { layers { linear { out_features: 100000000 } } }
    data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 64
           test_samples: 16 } }
    batch_size: 8 epochs: 1 optimizer { lr: 0.1 })");
  TrainOptions o;
  o.quiet = true;
  o.available_memory = int64_t{1} << 30;
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(spec, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(t.status().message())
                .rfind("layer 0 (linear) needs 75.3 GiB of parameters", 0),
            0u)
      << t.status();
  EXPECT_NE(t.status().message().find("this machine has 1.0 GiB available"),
            std::string::npos)
      << t.status();
  // A small job passes the check.
  o.available_memory = int64_t{1} << 30;
  EXPECT_TRUE(Trainer::Create(Spec(kSyntheticMlp), o).ok());
}

TEST(Trainer, ReportIsJsonWithTheRequiredKeys) {
  TrainResult r;
  r.samples_per_s = 1234.5;
  r.test_accuracy = 0.98;
  r.steps = 3;
  r.epoch_results.push_back({});
  const std::string json = ReportJson(r);
  for (const char* key : {"\"samples_per_s\": 1234.5", "\"train_seconds\"",
                          "\"test_accuracy\": 0.98", "\"final_loss\"",
                          "\"steps\": 3", "\"epochs\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
}

}  // namespace
}  // namespace cohort
