// Elastic recovery inside the trainer: a generation ends under the workers
// (here: after a given number of steps, as if a peer had died), and the next
// generation, of the same or another size, agrees on the newest state any
// member holds and trains the rest of the epoch. Workers are threads, each
// with its own trainer and a real Gloo communicator over loopback TCP.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "tests/own_data.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_store.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

constexpr int kBatch = 16;
constexpr int kSamples = 512;

// `extra`: more top-level lines (accumulation and clipping).
JobSpec Spec(
    int batch = 16, const std::string& extra = "",
    const std::string& optimizer = "kind: SGD lr: 0.05 momentum: 0.9") {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(absl::StrCat("model { zoo: \"mlp_seed\" }\n"
                                "data { kind: SYNTHETIC synthetic { shape: 100 "
                                "train_samples: 512 test_samples: 64 } }\n"
                                "batch_size: ",
                                batch,
                                "\nepochs: 1\n"
                                "optimizer { ",
                                optimizer, " }\nseed: 5\n", extra),
                   "elastic.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// The same job on your own data: 512 samples of [20] in two
// NUMPY shards (tests/own_data.h).
// With `float_targets`, the targets are [10] floats under MSE.
JobSpec NumpySpec(bool float_targets = false) {
  const std::string dir =
      absl::StrCat(std::getenv("TEST_TMPDIR"),
                   float_targets ? "/elastic_regression" : "/elastic_npy");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat(
          "model { layers { linear { out_features: 10 } } }\n",
          float_targets ? NumpyRegressionBlock(dir) : NumpyDataBlock(dir),
          "batch_size: 16\nepochs: 1\n"
          "optimizer { kind: SGD lr: 0.05 momentum: 0.9 }\n"
          "seed: 5\n"),
      "elastic_npy.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

struct RankResult {
  absl::Status status;
  TrainResult result;
  std::vector<float> params;
};

// One generation of `states.size()` workers; worker w carries states[w].
// With stop_after > 0 every worker leaves after that many steps (the
// generation ends under them) and keeps its state for the next one.
std::vector<RankResult> Generation(const JobSpec& spec,
                                   std::vector<ElasticState>& states,
                                   int64_t stop_after, const std::string& key,
                                   double min_step_seconds = 0) {
  const int workers = states.size();
  InMemoryKv kv;
  std::vector<RankResult> out(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      KvGlooStore store(&kv, key, absl::Seconds(20));
      GlooOptions g;
      g.timeout = absl::Seconds(20);
      auto comm = CreateGlooCommunicator(store, w, workers, g);
      ASSERT_TRUE(comm.ok()) << comm.status();
      DistributedContext d;
      d.rank = w;
      d.world_size = workers;
      d.replica_offset = w;
      d.total_replicas = workers;
      d.comm = comm->get();
      d.epoch_seed = [&spec](int64_t) -> absl::StatusOr<uint64_t> {
        return spec.seed();
      };
      TrainOptions o;
      o.quiet = true;
      o.distributed = &d;
      o.elastic = &states[w];
      o.stop_after_steps = stop_after;
      o.min_step_seconds = min_step_seconds;
      o.final_parameters = &out[w].params;
      absl::StatusOr<TrainResult> r = Train(spec, o);
      out[w].status = r.status();
      if (r.ok()) out[w].result = *r;
      // A generation that ends leaves the communicator broken, as the
      // worker process does, so no rank waits for another on destruction.
      if (!r.ok()) (*comm)->Abort(r.status());
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void ExpectSameWorldResumesExactly(const JobSpec& spec) {
  std::vector<ElasticState> straight(3);
  const std::vector<RankResult> reference = Generation(spec, straight, 0, "s/");
  for (const RankResult& r : reference) ASSERT_TRUE(r.status.ok()) << r.status;

  std::vector<ElasticState> states(3);
  const std::vector<RankResult> first = Generation(spec, states, 5, "a/");
  for (const RankResult& r : first) {
    EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
  }
  ASSERT_TRUE(states[0].snapshot.has_value());
  EXPECT_EQ(states[0].snapshot->step, 5);
  // Only rank 0 kept its state (ranks 1 and 2 are replacements): it gives
  // it to both.
  states[1] = ElasticState();
  states[2] = ElasticState();
  const std::vector<RankResult> second = Generation(spec, states, 0, "b/");
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(second[w].status.ok()) << second[w].status;
    EXPECT_EQ(second[w].result.steps, reference[w].result.steps);
    EXPECT_EQ(second[w].params, reference[w].params)
        << "worker " << w << ": the resumed run differs from the straight one";
  }
  // And the comparison can fail: without the state, the last steps alone
  // give other parameters.
  std::vector<ElasticState> fresh(3);
  for (ElasticState& s : fresh) {
    s.snapshot = states[0].snapshot;
    s.snapshot->tensors[0].values[0] += 1.0f;
  }
  const std::vector<RankResult> other = Generation(spec, fresh, 0, "c/");
  ASSERT_TRUE(other[0].status.ok()) << other[0].status;
  EXPECT_NE(other[0].params, reference[0].params);
}

TEST(ElasticResume, SameWorldResumesExactlyFromOneHolder) {
  ExpectSameWorldResumesExactly(Spec());
}

// PowerSGD's error feedback is each worker's own: workers that keep their
// state through a regroup go on exactly; without it the run differs.
TEST(ElasticResume, CompressionErrorFeedbackResumesExactly) {
  const JobSpec spec =
      Spec(16, "compression { kind: POWERSGD rank: 2 warmup_steps: 2 }\n");
  std::vector<ElasticState> straight(3);
  const std::vector<RankResult> reference = Generation(spec, straight, 0, "s/");
  for (const RankResult& r : reference) ASSERT_TRUE(r.status.ok()) << r.status;

  std::vector<ElasticState> states(3);
  Generation(spec, states, 5, "a/");
  for (const ElasticState& s : states) {
    EXPECT_EQ(s.exchange_step, 5);
    EXPECT_FALSE(s.exchange_state.empty());
  }
  std::vector<ElasticState> without = states;
  const std::vector<RankResult> second = Generation(spec, states, 0, "b/");
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(second[w].status.ok()) << second[w].status;
    EXPECT_EQ(second[w].params, reference[w].params) << "worker " << w;
  }
  for (ElasticState& s : without) s.exchange_state.clear();
  const std::vector<RankResult> other = Generation(spec, without, 0, "c/");
  ASSERT_TRUE(other[0].status.ok()) << other[0].status;
  EXPECT_NE(other[0].params, reference[0].params);
}

// A generation that ends between two optimizer steps of
// accumulated batches (5 of 3 batches of 5 samples, each worker's 171
// samples making 35 batches: the epoch's last step has 2) and clipped
// gradients resume exactly as well.
TEST(ElasticResume, AccumulationAndClippingResumeExactly) {
  ExpectSameWorldResumesExactly(
      Spec(5, "gradient_accumulation_steps: 3\n",
           "kind: SGD lr: 0.05 momentum: 0.9 clip_grad_norm: 0.3"));
}

// Three workers accumulating 4 batches of 4 train as three
// workers with batches of 16, to rounding: the all-reduce carries only the
// step's summed gradient.
TEST(ElasticResume, AccumulatedBatchesTrainAsOneLargerBatchAcrossWorkers) {
  std::vector<ElasticState> a(3), b(3), c(3);
  const std::vector<RankResult> big = Generation(Spec(), a, 0, "big/");
  const std::vector<RankResult> small =
      Generation(Spec(4, "gradient_accumulation_steps: 4\n"), b, 0, "acc/");
  // The comparison can fail: batches of 4 without accumulation differ.
  const std::vector<RankResult> plain = Generation(Spec(4), c, 0, "plain/");
  ASSERT_TRUE(plain[0].status.ok()) << plain[0].status;
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(big[w].status.ok()) << big[w].status;
    ASSERT_TRUE(small[w].status.ok()) << small[w].status;
    EXPECT_EQ(small[w].result.steps, big[w].result.steps);
    EXPECT_EQ(small[w].result.samples, big[w].result.samples);
    ASSERT_EQ(small[w].params.size(), big[w].params.size());
    double worst = 0;
    for (size_t i = 0; i < big[w].params.size(); ++i) {
      worst = std::max<double>(worst,
                               std::abs(small[w].params[i] - big[w].params[i]));
    }
    EXPECT_LE(worst, 1e-5) << "worker " << w;
  }
  double apart = 0;
  for (size_t i = 0; i < big[0].params.size(); ++i) {
    apart = std::max<double>(apart,
                             std::abs(plain[0].params[i] - big[0].params[i]));
  }
  EXPECT_GT(apart, 1e-3) << "batches of 4 trained as batches of 16";
}

// After a regroup the result covers every generation:
// the training time of the epoch the first one ended in, and that epoch's
// loss over all of its steps (it was divided by all steps but summed over
// the last generation's only).
TEST(ElasticResume, TheResultCoversEveryGeneration) {
  const JobSpec spec = Spec();
  constexpr double kStep = 0.05;  // each step takes at least this long
  std::vector<ElasticState> straight(3);
  const std::vector<RankResult> reference =
      Generation(spec, straight, 0, "s/", kStep);
  ASSERT_TRUE(reference[0].status.ok()) << reference[0].status;
  std::vector<ElasticState> states(3);
  Generation(spec, states, 5, "a/", kStep);
  const std::vector<RankResult> second =
      Generation(spec, states, 0, "b/", kStep);
  ASSERT_TRUE(second[0].status.ok()) << second[0].status;
  const TrainResult& got = second[0].result;
  const TrainResult& want = reference[0].result;
  EXPECT_EQ(got.samples, want.samples);
  EXPECT_GE(got.train_seconds, 0.9 * kStep * want.steps)
      << got.train_seconds << " s for " << want.steps << " steps";
  ASSERT_EQ(got.epoch_results.size(), 1);
  ASSERT_EQ(want.epoch_results.size(), 1);
  EXPECT_EQ(got.epoch_results[0].steps, want.epoch_results[0].steps);
  // The same losses added in the same order.
  EXPECT_EQ(got.epoch_results[0].train_loss, want.epoch_results[0].train_loss);
  EXPECT_EQ(got.epoch_results[0].train_accuracy,
            want.epoch_results[0].train_accuracy);
}

void ExpectTheRestOfTheEpoch(const JobSpec& spec) {
  std::vector<ElasticState> states(3);
  const int64_t before = 4;  // steps of the 3-worker generation
  Generation(spec, states, before, "d/");
  // Rank 2 died; ranks 0 and 1 regroup as a world of 2.
  states.pop_back();
  const std::vector<RankResult> second = Generation(spec, states, 0, "e/");
  const int64_t done = before * kBatch * 3;  // samples of the epoch's order
  const int64_t rest = kSamples - done;      // 320: 10 steps of 2 x 16
  int64_t trained = 0;
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(second[w].status.ok()) << second[w].status;
    const TrainResult& r = second[w].result;
    EXPECT_EQ(r.steps, before + rest / (2 * kBatch));
    // Each rank's result includes its 4 steps of the first generation.
    trained += r.samples - before * kBatch;
  }
  EXPECT_EQ(trained, rest) << "samples trained after the regroup";
  EXPECT_EQ(second[0].params, second[1].params);
  ASSERT_EQ(second[0].result.epoch_results.size(), 1u);
  EXPECT_EQ(second[0].result.epoch_results[0].steps, before + 10);
  // The epoch was evaluated.
  EXPECT_GE(second[0].result.test_loss, 0.0);
}

TEST(ElasticResume, SmallerWorldTrainsExactlyTheRestOfTheEpoch) {
  ExpectTheRestOfTheEpoch(Spec());
}

TEST(ElasticResume, OnNumpyShardsTooTheRestOfTheEpochIsExact) {
  ExpectTheRestOfTheEpoch(NumpySpec());
}

TEST(ElasticResume, OnFloatTargetsTooTheRestOfTheEpochIsExact) {
  ExpectTheRestOfTheEpoch(NumpySpec(/*float_targets=*/true));
}

// Early stopping survives a regroup. Evaluation every 3
// steps on the test loss; patience 2 with a min_delta that the loss soon
// stops beating, so the run stops early. A generation that ends after any
// step (between evaluations, or just after one) resumes to stop at the
// same step with the same best and the same parameters.
JobSpec EarlyStopSpec() {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "model { zoo: \"mlp_seed\" }\n"
      "data { kind: SYNTHETIC synthetic { shape: 100 train_samples: 512 "
      "test_samples: 64 } }\n"
      "batch_size: 16\nepochs: 6\n"
      "optimizer { kind: SGD lr: 0.05 momentum: 0.9 }\nseed: 5\n"
      "eval { every_steps: 3 metric: \"loss\" early_stopping_patience: 2 "
      "min_delta: 0.02 }\n",
      "early_stop.textproto");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

void ExpectSameControl(const RankResult& got, const RankResult& want) {
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.result.steps, want.result.steps);
  EXPECT_EQ(got.result.stopped_early, want.result.stopped_early);
  EXPECT_EQ(got.result.best_step, want.result.best_step);
  EXPECT_EQ(got.result.best_metric, want.result.best_metric);
  EXPECT_EQ(got.params, want.params) << "the resumed run's parameters differ";
}

TEST(ElasticResume, EarlyStoppingStopsAtTheSameStep) {
  const JobSpec spec = EarlyStopSpec();
  std::vector<ElasticState> straight(3);
  const std::vector<RankResult> reference = Generation(spec, straight, 0, "s/");
  ASSERT_TRUE(reference[0].status.ok()) << reference[0].status;
  const TrainResult& r = reference[0].result;
  // 11 steps an epoch: a meaningful test stops well before the 66th.
  ASSERT_TRUE(r.stopped_early) << r.steps << " steps";
  EXPECT_LT(r.steps, 60);
  EXPECT_EQ(r.steps % 3, 0);
  EXPECT_EQ(r.best_metric_name, "loss");
  EXPECT_GT(r.best_step, 0);
  EXPECT_LE(r.best_step, r.steps - 6);
  EXPECT_EQ(reference[1].result.steps, r.steps);  // every rank stopped there
  for (const int64_t at : {r.best_step + 1, r.best_step + 3}) {
    std::vector<ElasticState> states(3);
    Generation(spec, states, at, absl::StrCat("a", at, "/"));
    ASSERT_TRUE(states[0].snapshot.has_value());
    states[1] = ElasticState();
    states[2] = ElasticState();
    const std::vector<RankResult> second =
        Generation(spec, states, 0, absl::StrCat("b", at, "/"));
    for (int w = 0; w < 3; ++w) {
      SCOPED_TRACE(absl::StrCat("ended after step ", at, ", worker ", w));
      ExpectSameControl(second[w], reference[w]);
    }
  }
}

// A generation that ended inside an evaluation (a peer died in its
// all-reduce) kept the state of the step before that evaluation: the next
// generation runs the evaluation first, as the undisturbed run did.
TEST(ElasticResume, AnEvaluationCutShortIsRunAgain) {
  const JobSpec spec = EarlyStopSpec();
  std::vector<ElasticState> straight(3);
  const std::vector<RankResult> reference = Generation(spec, straight, 0, "s/");
  ASSERT_TRUE(reference[0].status.ok()) << reference[0].status;
  const int64_t at = reference[0].result.best_step + 3;  // an evaluation step
  std::vector<ElasticState> before(3), after(3);
  Generation(spec, before, at - 1, "c/");
  Generation(spec, after, at, "d/");
  ASSERT_TRUE(before[0].snapshot && after[0].snapshot);
  std::vector<ElasticState> states(3);
  states[0].snapshot = after[0].snapshot;
  states[0].snapshot->metadata["early_stopping"] =
      before[0].snapshot->metadata["early_stopping"];
  ASSERT_NE(states[0].snapshot->metadata["early_stopping"],
            after[0].snapshot->metadata["early_stopping"]);
  const std::vector<RankResult> second = Generation(spec, states, 0, "e/");
  for (int w = 0; w < 3; ++w) {
    SCOPED_TRACE(absl::StrCat("worker ", w));
    ExpectSameControl(second[w], reference[w]);
  }
}

}  // namespace
}  // namespace cohort
