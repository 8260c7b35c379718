#include "worker/optim/optimizer.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Three elements and three steps of gradients; the expected parameters
// below were computed from PyTorch's update formulas in double, with
// hyper-parameters exact in binary so float and double specs agree.
constexpr double kStart[3] = {1.0, -2.0, 0.5};
constexpr double kGrads[3][3] = {
    {0.5, -1.0, 0.0}, {0.25, 0.5, -0.75}, {-1.0, 2.0, 0.125}};
using Expected = std::vector<std::vector<double>>;

OptimizerSpec Spec(OptimizerSpec::Kind kind, float lr, float wd) {
  OptimizerSpec s;
  s.set_kind(kind);
  s.set_lr(lr);
  s.set_weight_decay(wd);
  return s;
}

OptimizerSpec AdamSpec(OptimizerSpec::Kind kind) {
  OptimizerSpec s = Spec(kind, 0.0625f, 0.25f);
  s.set_beta1(0.875f);
  s.set_beta2(0.9921875f);
  s.set_eps(1.0f / 1024);
  return s;
}

// Runs the three steps on 19 elements (element i follows pattern i % 3), so
// the float kernels' vector loop and scalar tail are both checked.
template <typename T>
void ExpectSteps(const OptimizerSpec& spec, const Expected& want, double tol) {
  constexpr int kN = 19;
  std::unique_ptr<Optimizer<T>> opt = MakeOptimizer<T>(spec, kN);
  std::vector<T> p(kN), g(kN);
  for (int i = 0; i < kN; ++i) p[i] = kStart[i % 3];
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < kN; ++i) g[i] = kGrads[step][i % 3];
    opt->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), spec.lr());
    for (int i = 0; i < kN; ++i) {
      ASSERT_NEAR(p[i], want[step][i % 3], tol)
          << "step " << step << " element " << i;
    }
  }
}

void ExpectAll(const OptimizerSpec& spec, const Expected& want) {
  ExpectSteps<double>(spec, want, 1e-13);
  ExpectSteps<float>(spec, want, 2e-6);
}

TEST(Sgd, PlainMatchesHandComputedSteps) {
  ExpectAll(Spec(OptimizerSpec::SGD, 0.125f, 0.25f),
            {{0.90625, -1.8125, 0.484375},
             {0.8466796875, -1.818359375, 0.56298828125},
             {0.945220947265625, -2.01153564453125, 0.5297698974609375}});
}

TEST(Sgd, MomentumMatchesHandComputedSteps) {
  OptimizerSpec spec = Spec(OptimizerSpec::SGD, 0.125f, 0.25f);
  spec.set_momentum(0.5f);
  // The first step equals plain SGD: the buffer starts as the gradient.
  ExpectAll(spec, {{0.90625, -1.8125, 0.484375},
                   {0.7998046875, -1.724609375, 0.55517578125},
                   {0.846588134765625, -1.87677001953125, 0.5576019287109375}});
}

TEST(Sgd, NesterovMatchesHandComputedSteps) {
  OptimizerSpec spec = Spec(OptimizerSpec::SGD, 0.125f, 0.0f);
  spec.set_momentum(0.75f);
  spec.set_nesterov(true);
  ExpectAll(spec, {{0.890625, -1.78125, 0.5},
                   {0.80078125, -1.8203125, 0.6640625},
                   {0.9755859375, -2.240234375, 0.689453125}});
}

TEST(Adam, MatchesHandComputedStepsWithL2Decay) {
  ExpectAll(AdamSpec(OptimizerSpec::ADAM),
            {{0.9375812743823146, -1.9375406636304489, 0.437984496124031},
             {0.8774007316445841, -1.8967432075630284, 0.47620099691613477},
             {0.8698971559676476, -1.9042287914390679, 0.48915024859942835}});
}

TEST(AdamW, MatchesHandComputedStepsWithDecoupledDecay) {
  // Element 2 has a zero first gradient: only the decay moves it.
  ExpectAll(AdamSpec(OptimizerSpec::ADAMW),
            {{0.9219968323586745, -1.906310975609756, 0.4921875},
             {0.8496904275709231, -1.860714396923315, 0.5314590532540944},
             {0.8506187202709125, -1.861464698756518, 0.5517319155564393}});
}

TEST(Optimizer, StateLayout) {
  OptimizerSpec sgd = Spec(OptimizerSpec::SGD, 0.1f, 0.0f);
  EXPECT_TRUE(MakeOptimizer<float>(sgd, 10)->State().empty());
  sgd.set_momentum(0.9f);
  // The rule owns its state: keep it alive while the pointers are used.
  std::unique_ptr<Optimizer<float>> momentum = MakeOptimizer<float>(sgd, 10);
  std::vector<Tensor*> state = momentum->State();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0]->shape(), Shape({10}));

  std::unique_ptr<Optimizer<float>> adam =
      MakeOptimizer<float>(AdamSpec(OptimizerSpec::ADAM), 10);
  std::vector<float> p(10, 1.0f), g(10, 0.5f);
  adam->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), 0.1);
  adam->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), 0.1);
  state = adam->State();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0]->shape(), Shape({10}));
  EXPECT_EQ(state[1]->shape(), Shape({10}));
  EXPECT_EQ(state[2]->shape(), Shape({1}));
  EXPECT_EQ((*state[2])[0], 2.0f);
  EXPECT_GT((*state[1])[0], 0.0f);
}

// Copying the state into a fresh optimizer continues the run exactly.
TEST(Optimizer, RestoredStateContinuesIdentically) {
  for (OptimizerSpec spec :
       {AdamSpec(OptimizerSpec::ADAMW), Spec(OptimizerSpec::SGD, 0.1f, 0.f)}) {
    spec.set_momentum(spec.kind() == OptimizerSpec::SGD ? 0.9f : 0.0f);
    constexpr int kN = 21;
    std::vector<float> a(kN, 1.0f), b(kN, 1.0f), g(kN);
    for (int i = 0; i < kN; ++i) g[i] = 0.1f * (i - 10);
    auto first = MakeOptimizer<float>(spec, kN);
    for (int s = 0; s < 3; ++s) {
      first->Step(absl::MakeSpan(a), absl::MakeConstSpan(g), 0.01);
    }
    b = a;
    auto second = MakeOptimizer<float>(spec, kN);
    std::vector<Tensor*> from = first->State(), to = second->State();
    ASSERT_EQ(from.size(), to.size());
    for (size_t k = 0; k < from.size(); ++k) to[k]->CopyFrom(*from[k]);
    first->Step(absl::MakeSpan(a), absl::MakeConstSpan(g), 0.01);
    second->Step(absl::MakeSpan(b), absl::MakeConstSpan(g), 0.01);
    EXPECT_EQ(a, b) << spec.DebugString();
  }
}

// f(p) = sum_i a_i (p_i - c_i)^2 / 2 with curvatures from 0.5 to 2: every
// optimizer must reach the minimum c from p = 0.
void ExpectConverges(const OptimizerSpec& spec, int steps, double tol) {
  constexpr int kN = 37;
  std::vector<float> p(kN, 0.0f), g(kN), a(kN), c(kN);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int i = 0; i < kN; ++i) {
    a[i] = 0.5f + 1.5f * i / (kN - 1);
    c[i] = u(rng);
  }
  auto opt = MakeOptimizer<float>(spec, kN);
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < kN; ++i) g[i] = a[i] * (p[i] - c[i]);
    opt->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), spec.lr());
  }
  for (int i = 0; i < kN; ++i) {
    EXPECT_NEAR(p[i], c[i], tol) << spec.DebugString() << " element " << i;
  }
}

TEST(Optimizer, ConvergesOnQuadratic) {
  ExpectConverges(Spec(OptimizerSpec::SGD, 0.5f, 0.0f), 200, 1e-4);
  OptimizerSpec momentum = Spec(OptimizerSpec::SGD, 0.1f, 0.0f);
  momentum.set_momentum(0.9f);
  ExpectConverges(momentum, 400, 1e-4);
  momentum.set_nesterov(true);
  ExpectConverges(momentum, 400, 1e-4);
  for (auto kind : {OptimizerSpec::ADAM, OptimizerSpec::ADAMW}) {
    OptimizerSpec adam = Spec(kind, 0.05f, 0.0f);
    adam.set_beta1(0.9f);
    adam.set_beta2(0.999f);
    adam.set_eps(1e-8f);
    ExpectConverges(adam, 2000, 1e-3);
  }
}

// Weight decay pulls the minimum of f + wd/2 |p|^2 to a c / (a + wd).
TEST(Optimizer, L2DecayShiftsTheMinimum) {
  OptimizerSpec spec = Spec(OptimizerSpec::SGD, 0.5f, 1.0f);
  std::vector<float> p(9, 0.0f), g(9);
  auto opt = MakeOptimizer<float>(spec, 9);
  for (int s = 0; s < 100; ++s) {
    for (int i = 0; i < 9; ++i) g[i] = p[i] - 2.0f;  // a = 1, c = 2
    opt->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), spec.lr());
  }
  for (float x : p) EXPECT_NEAR(x, 1.0f, 1e-5);
}

}  // namespace
}  // namespace cohort
