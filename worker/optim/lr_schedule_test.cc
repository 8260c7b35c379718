#include "worker/optim/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace cohort {
namespace {

OptimizerSpec Lr(float lr) {
  OptimizerSpec o;
  o.set_lr(lr);
  return o;
}

LrSchedule Schedule(LrSchedule::Kind kind, int64_t warmup = 0) {
  LrSchedule s;
  s.set_kind(kind);
  s.set_warmup_steps(warmup);
  return s;
}

TEST(LearningRate, Constant) {
  LrSchedule s = Schedule(LrSchedule::CONSTANT);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.5f), s, 0, 100), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.5f), s, 99, 100), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.5f), s, 1000, 100), 0.5);
}

TEST(LearningRate, StepDecaysEveryStepSize) {
  LrSchedule s = Schedule(LrSchedule::STEP);
  s.set_step_size(10);
  s.set_gamma(0.5f);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.8f), s, 0, 100), 0.8f);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.8f), s, 9, 100), 0.8f);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.8f), s, 10, 100), 0.4f);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.8f), s, 25, 100), 0.2f);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(0.8f), s, 39, 100), 0.1f);
}

TEST(LearningRate, CosineFromLrToMinLr) {
  LrSchedule s = Schedule(LrSchedule::COSINE);
  s.set_min_lr(0.25f);
  // lr 1, min 0.25: 0.25 + 0.75 * (1 + cos(pi * step / 100)) / 2.
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), s, 0, 100), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), s, 50, 100), 0.625);
  EXPECT_NEAR(LearningRate(Lr(1.0f), s, 25, 100),
              0.25 + 0.375 * (1 + std::sqrt(0.5)), 1e-15);
  EXPECT_NEAR(LearningRate(Lr(1.0f), s, 100, 100), 0.25, 1e-15);
  EXPECT_NEAR(LearningRate(Lr(1.0f), s, 150, 100), 0.25, 1e-15);
}

TEST(LearningRate, WarmupScalesLinearlyThenHandsOver) {
  LrSchedule s = Schedule(LrSchedule::CONSTANT, 4);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), s, 0, 100), 0.25);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), s, 1, 100), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), s, 3, 100), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), s, 4, 100), 1.0);
}

TEST(LearningRate, WarmupAppliesToCosineAndStep) {
  LrSchedule cosine = Schedule(LrSchedule::COSINE, 10);
  // step 4 of 8: cosine value 0.5, warm-up factor 5/10.
  EXPECT_NEAR(LearningRate(Lr(1.0f), cosine, 4, 8), 0.25, 1e-15);
  LrSchedule step = Schedule(LrSchedule::STEP, 4);
  step.set_step_size(2);
  step.set_gamma(0.5f);
  // step 2: decayed once (0.5), warm-up factor 3/4.
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), step, 2, 100), 0.375);
  EXPECT_DOUBLE_EQ(LearningRate(Lr(1.0f), step, 4, 100), 0.25);
}

}  // namespace
}  // namespace cohort
