#include "worker/early_stopping.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(EarlyStoppingTest, HigherIsBetterStopsAfterPatience) {
  EarlyStopping es("accuracy", 2, 0);
  EXPECT_TRUE(es.Observe(10, 0.5));  // the first is always the best
  EXPECT_TRUE(es.Observe(20, 0.6));
  EXPECT_FALSE(es.Observe(30, 0.6));  // equal is no improvement
  EXPECT_FALSE(es.ShouldStop());
  EXPECT_FALSE(es.Observe(40, 0.55));
  EXPECT_TRUE(es.ShouldStop());
  EXPECT_EQ(es.state().best, 0.6);
  EXPECT_EQ(es.state().best_step, 20);
  EXPECT_EQ(es.state().since_best, 2);
  EXPECT_EQ(es.state().last_eval_step, 40);
}

TEST(EarlyStoppingTest, ImprovementResetsTheCount) {
  EarlyStopping es("accuracy", 2, 0);
  es.Observe(1, 0.5);
  es.Observe(2, 0.4);
  EXPECT_TRUE(es.Observe(3, 0.7));
  EXPECT_EQ(es.state().since_best, 0);
  es.Observe(4, 0.6);
  EXPECT_FALSE(es.ShouldStop());
}

TEST(EarlyStoppingTest, LowerIsBetterForLossMseMae) {
  for (const char* m : {"loss", "mse", "mae"}) {
    EarlyStopping es(m, 1, 0);
    es.Observe(1, 2.0);
    EXPECT_TRUE(es.Observe(2, 1.5)) << m;
    EXPECT_FALSE(es.Observe(3, 1.6)) << m;
    EXPECT_TRUE(es.ShouldStop()) << m;
    EXPECT_EQ(es.state().best, 1.5) << m;
  }
  EXPECT_TRUE(HigherIsBetter("r2"));
  EXPECT_TRUE(HigherIsBetter("top5_accuracy"));
  EXPECT_FALSE(HigherIsBetter("loss"));
}

// The click-through-rate metrics: AUC higher is better, normalized entropy
// lower; both appended to the control metrics, whose earlier indices (in
// checkpoints and the elastic agreement) keep their meaning.
TEST(EarlyStoppingTest, AucHigherAndNormalizedEntropyLowerIsBetter) {
  EarlyStopping auc("auc", 1, 0);
  auc.Observe(1, 0.70);
  EXPECT_TRUE(auc.Observe(2, 0.75));
  EXPECT_FALSE(auc.Observe(3, 0.74));
  EXPECT_TRUE(auc.ShouldStop());
  EXPECT_EQ(auc.state().best, 0.75);
  EarlyStopping ne("normalized_entropy", 1, 0);
  ne.Observe(1, 0.9);
  EXPECT_TRUE(ne.Observe(2, 0.8));
  EXPECT_FALSE(ne.Observe(3, 0.85));
  EXPECT_TRUE(ne.ShouldStop());
  EXPECT_EQ(ne.state().best, 0.8);
  EXPECT_EQ(ControlMetricIndex("perplexity"), 6);
  EXPECT_EQ(ControlMetricIndex("auc"), 7);
  EXPECT_EQ(ControlMetricIndex("normalized_entropy"), 8);
  for (const char* m : {"r2", "auc", "normalized_entropy"}) {
    EXPECT_TRUE(MayBeUndefined(m)) << m;
  }
  for (const char* m : {"loss", "accuracy", "top5_accuracy", "perplexity"}) {
    EXPECT_FALSE(MayBeUndefined(m)) << m;
  }
}

TEST(EarlyStoppingTest, AucStateTravelsInACheckpoint) {
  EarlyStopping es("normalized_entropy", 3, 0);
  es.Observe(4, 0.8125);
  es.Observe(8, 0.9);
  absl::StatusOr<EarlyStoppingState> back =
      EarlyStoppingState::Decode(es.state().Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == es.state()) << es.state().Encode();
  EarlyStopping resumed("normalized_entropy", 3, 0);
  EXPECT_TRUE(resumed.Restore(*back));
  EarlyStopping other("auc", 3, 0);
  EXPECT_FALSE(other.Restore(*back));  // another metric's best
}

TEST(EarlyStoppingTest, MinDeltaAsWritten) {
  // 0.5 + 0.001 is not more than 0.001 better than 0.5 (the float
  // 0.001f is slightly more than 0.001; the spec's text is what counts).
  EarlyStopping es("accuracy", 3, 0.001f);
  es.Observe(1, 0.5);
  EXPECT_FALSE(es.Observe(2, 0.5 + 0.001));
  EXPECT_TRUE(es.Observe(3, 0.5 + 0.0011));
  EarlyStopping lower("loss", 3, 0.1f);
  lower.Observe(1, 1.0);
  EXPECT_FALSE(lower.Observe(2, 0.95));
  EXPECT_TRUE(lower.Observe(3, 0.85));
}

TEST(EarlyStoppingTest, NanIsNeverAnImprovement) {
  EarlyStopping es("loss", 2, 0);
  EXPECT_FALSE(es.Observe(1, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(es.state().has_best);
  EXPECT_TRUE(es.Observe(2, 3.0));
  EXPECT_FALSE(es.Observe(3, std::nan("")));
  EXPECT_FALSE(es.Observe(4, std::nan("")));
  EXPECT_TRUE(es.ShouldStop());
}

TEST(EarlyStoppingTest, PatienceZeroNeverStops) {
  EarlyStopping es("accuracy", 0, 0);
  es.Observe(1, 0.9);
  for (int i = 2; i < 100; ++i) es.Observe(i, 0.1);
  EXPECT_FALSE(es.ShouldStop());
  EXPECT_EQ(es.state().best_step, 1);
}

TEST(EarlyStoppingTest, EncodeDecodeIsExact) {
  EarlyStopping es("r2", 4, 0);
  es.Observe(7, 0.1 + 0.2);  // 0.30000000000000004
  es.Observe(9, 0.25);
  const std::string text = es.state().Encode();
  absl::StatusOr<EarlyStoppingState> back = EarlyStoppingState::Decode(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == es.state()) << text << " vs " << back->Encode();
  EXPECT_EQ(back->best, 0.1 + 0.2);
  EXPECT_FALSE(EarlyStoppingState::Decode("best=x").ok());
  EXPECT_FALSE(EarlyStoppingState::Decode("metric=f1").ok());
}

TEST(EarlyStoppingTest, RestoreContinuesExactly) {
  EarlyStopping a("accuracy", 2, 0);
  a.Observe(1, 0.5);
  a.Observe(2, 0.4);
  EarlyStopping b("accuracy", 2, 0);
  ASSERT_TRUE(b.Restore(a.state()));
  a.Observe(3, 0.45);
  b.Observe(3, 0.45);
  EXPECT_TRUE(a.ShouldStop());
  EXPECT_TRUE(a.state() == b.state());
}

TEST(EarlyStoppingTest, RestoreOfAnotherMetricStartsAfresh) {
  EarlyStopping a("accuracy", 2, 0);
  a.Observe(5, 0.5);
  EarlyStopping b("loss", 2, 0);
  EXPECT_FALSE(b.Restore(a.state()));
  EXPECT_FALSE(b.state().has_best);
  EXPECT_EQ(b.state().last_eval_step, 5);
  EXPECT_TRUE(b.Observe(6, 9.0));
}

TEST(EarlyStoppingTest, LargerPatienceOnResumeGoesOn) {
  EarlyStopping a("accuracy", 1, 0);
  a.Observe(1, 0.5);
  a.Observe(2, 0.4);
  ASSERT_TRUE(a.ShouldStop());
  EarlyStopping b("accuracy", 3, 0);
  b.Restore(a.state());
  EXPECT_FALSE(b.ShouldStop());
}

TEST(EarlyStoppingTest, DefaultMetric) {
  EvalSpec e;
  EXPECT_EQ(ControlMetric(e, false), "accuracy");
  EXPECT_EQ(ControlMetric(e, true), "loss");
  e.set_metric("mae");
  EXPECT_EQ(ControlMetric(e, true), "mae");
}

}  // namespace
}  // namespace cohort
