// The update rules' own contract: Adam's scalars, the state each rule keeps,
// and float (vector loop and scalar tail) against double. The rules'
// results against PyTorch's formulas, through a job's OptimizerSpec, are
// checked in worker/optim/optimizer_test.cc; against the CUDA kernels in
// kernels/cuda/ops_test.cc.
#include "kernels/update_rules.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/update_options.h"

namespace cohort {
namespace {

// Hyper-parameters exact in binary, so the expected scalars are exact too.
AdamOptions Options(bool decoupled) {
  AdamOptions o;
  o.beta1 = 0.875;
  o.beta2 = 0.9921875;
  o.eps = 1.0 / 1024;
  o.weight_decay = 0.25;
  o.decoupled = decoupled;
  return o;
}

TEST(AdamScalarsTest, FirstStepOfAdamAndAdamW) {
  const AdamScalars<double> adam =
      MakeAdamScalars<double>(0.0625, 1, Options(false));
  EXPECT_EQ(adam.decay, 1.0);
  EXPECT_EQ(adam.l2, 0.25);
  EXPECT_EQ(adam.beta2, 0.9921875);
  EXPECT_EQ(adam.lerp1, 0.125);
  EXPECT_EQ(adam.one_minus_beta2, 0.0078125);
  EXPECT_EQ(adam.bc2_sqrt, std::sqrt(0.0078125));
  EXPECT_EQ(adam.eps, 1.0 / 1024);
  EXPECT_EQ(adam.step_size, 0.5);  // 0.0625 / (1 - 0.875)

  const AdamScalars<float> adamw =
      MakeAdamScalars<float>(0.0625, 1, Options(true));
  EXPECT_EQ(adamw.decay, 0.984375f);  // 1 - 0.0625 * 0.25
  EXPECT_EQ(adamw.l2, 0.0f);
}

TEST(AdamScalarsTest, BiasCorrectionsAreComputedInDoubleThenRounded) {
  const AdamOptions o = Options(false);
  const AdamScalars<float> s = MakeAdamScalars<float>(1e-3, 3, o);
  EXPECT_EQ(s.bc2_sqrt,
            static_cast<float>(std::sqrt(1.0 - std::pow(o.beta2, 3.0))));
  EXPECT_EQ(s.step_size,
            static_cast<float>(1e-3 / (1.0 - std::pow(o.beta1, 3.0))));
}

TEST(UpdateRuleTest, StateIsTheBufferOrMomentsAndStepCount) {
  SgdOptions plain;
  EXPECT_TRUE(MakeSgdRule<float>(plain, 5)->State().empty());

  SgdOptions momentum;
  momentum.momentum = 0.9;
  std::unique_ptr<UpdateRule<float>> sgd = MakeSgdRule<float>(momentum, 5);
  ASSERT_EQ(sgd->State().size(), 1u);
  EXPECT_EQ(sgd->State()[0]->size(), 5);

  std::unique_ptr<UpdateRule<float>> adam = MakeAdamRule<float>({}, 5);
  std::vector<float> p(5, 1.0f);
  const std::vector<float> g(5, 0.5f);
  adam->Step(absl::MakeSpan(p), g, 0.1);
  adam->Step(absl::MakeSpan(p), g, 0.1);
  const std::vector<BasicTensor<float>*> state = adam->State();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0]->size(), 5);
  EXPECT_EQ(state[1]->size(), 5);
  ASSERT_EQ(state[2]->size(), 1);
  EXPECT_EQ((*state[2])[0], 2.0f);  // steps taken
}

// 19 elements: the float rules' 8-wide vector loop and their scalar tail
// must both agree with the double rules.
template <typename MakeRule>
void ExpectFloatMatchesDouble(MakeRule make) {
  constexpr int kN = 19;
  std::unique_ptr<UpdateRule<float>> f = make(float{});
  std::unique_ptr<UpdateRule<double>> d = make(double{});
  std::vector<float> pf(kN);
  std::vector<double> pd(kN);
  for (int i = 0; i < kN; ++i) pf[i] = pd[i] = 0.25 * (i % 5) - 0.5;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> gf(kN);
    std::vector<double> gd(kN);
    for (int i = 0; i < kN; ++i)
      gf[i] = gd[i] = 0.125 * ((i + step) % 7) - 0.375;
    f->Step(absl::MakeSpan(pf), gf, 0.0625);
    d->Step(absl::MakeSpan(pd), gd, 0.0625);
  }
  for (int i = 0; i < kN; ++i) EXPECT_NEAR(pf[i], pd[i], 1e-5) << i;
}

TEST(UpdateRuleTest, FloatMatchesDoubleForEveryRule) {
  SgdOptions nesterov;
  nesterov.momentum = 0.875;
  nesterov.weight_decay = 0.25;
  nesterov.nesterov = true;
  ExpectFloatMatchesDouble(
      [&](auto t) { return MakeSgdRule<decltype(t)>(nesterov, 19); });
  for (bool decoupled : {false, true}) {
    ExpectFloatMatchesDouble([&](auto t) {
      return MakeAdamRule<decltype(t)>(Options(decoupled), 19);
    });
  }
}

}  // namespace
}  // namespace cohort
