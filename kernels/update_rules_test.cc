// The update rules' own contract: Adam's scalars, the state each rule keeps,
// and float (vector loop and scalar tail) against double. The rules'
// results against PyTorch's formulas, through a job's OptimizerSpec, are
// checked in worker/optim/optimizer_test.cc; against the CUDA kernels in
// kernels/cuda/ops_test.cc.
#include "kernels/update_rules.h"

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "common/update_options.h"
#include "gtest/gtest.h"

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

// A buffer of four tensors (padded to 16) of which two are excluded from
// decay, with sizes that put tensors across kNormBlock multiples.
std::vector<ParamTensor> Tensors() {
  const std::vector<int64_t> sizes = {2 * kNormBlock + 48, 32, 3 * kNormBlock,
                                      16};
  return ParamTensorsOf(sizes, {false, true, false, true});
}

using RuleMaker = std::function<std::unique_ptr<UpdateRule<float>>(
    int64_t, const RuleLayout&)>;

// Steps the whole buffer `steps` times as the CPU engine does with `slices`
// slices cut on kNormBlock multiples: per slice, one rule; norm rules in two
// passes with the pieces' sums folded in between.
std::vector<float> SteppedBySlices(const RuleMaker& make, int slices,
                                   int steps) {
  const std::vector<ParamTensor> tensors = Tensors();
  const int64_t n = tensors.back().end;
  const RuleLayout whole = MakeRuleLayout(tensors, 0, n);
  std::vector<int64_t> cuts;
  for (int r = 0; r <= slices; ++r) {
    cuts.push_back(r == slices ? n
                               : (n * r / slices) / kNormBlock * kNormBlock);
  }
  std::vector<std::unique_ptr<UpdateRule<float>>> rules;
  for (int r = 0; r < slices; ++r) {
    rules.push_back(make(cuts[r + 1] - cuts[r],
                         MakeRuleLayout(tensors, cuts[r], cuts[r + 1])));
  }
  std::vector<float> p(n), g(n);
  for (int64_t i = 0; i < n; ++i) p[i] = std::sin(0.37 * i) * 0.5;
  std::vector<double> sums(2 * whole.num_pieces), totals(2 * whole.num_tensors);
  for (int step = 0; step < steps; ++step) {
    for (int64_t i = 0; i < n; ++i) g[i] = std::cos(0.11 * i + step) * 0.1;
    auto span = [&](int r, auto& v) {
      return absl::MakeSpan(v.data() + cuts[r], cuts[r + 1] - cuts[r]);
    };
    if (rules[0]->SumsPerPiece() == 0) {
      for (int r = 0; r < slices; ++r) {
        rules[r]->Step(span(r, p), span(r, g), 0.01);
      }
      continue;
    }
    for (int r = 0; r < slices; ++r) {
      rules[r]->BeginStep(span(r, p), span(r, g), sums.data());
    }
    FoldPieceSums(whole, 2, sums.data(), totals.data());
    for (int r = 0; r < slices; ++r) {
      rules[r]->FinishStep(span(r, p), span(r, g), 0.01, totals.data());
    }
  }
  return p;
}

std::vector<std::pair<const char*, RuleMaker>> EveryRule() {
  SgdOptions sgd;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  AdamOptions adamw;
  adamw.weight_decay = 0.01;
  adamw.decoupled = true;
  RmspropOptions rms;
  rms.momentum = 0.5;
  rms.centered = true;
  rms.weight_decay = 0.01;
  LambOptions lamb;
  lamb.weight_decay = 0.01;
  LarsOptions lars;
  lars.momentum = 0.9;
  lars.weight_decay = 0.01;
  AdagradOptions adagrad;
  adagrad.lr_decay = 0.1;
  adagrad.initial_accumulator_value = 0.1;
  adagrad.weight_decay = 0.01;
  return {
      {"sgd",
       [=](int64_t n, const RuleLayout& l) {
         return MakeSgdRule<float>(sgd, n, l);
       }},
      {"adamw",
       [=](int64_t n, const RuleLayout& l) {
         return MakeAdamRule<float>(adamw, n, l);
       }},
      {"rmsprop",
       [=](int64_t n, const RuleLayout& l) {
         return MakeRmspropRule<float>(rms, n, l);
       }},
      {"lamb",
       [=](int64_t n, const RuleLayout& l) {
         return MakeLambRule<float>(lamb, n, l);
       }},
      {"lars",
       [=](int64_t n, const RuleLayout& l) {
         return MakeLarsRule<float>(lars, n, l);
       }},
      {"adagrad",
       [=](int64_t n, const RuleLayout& l) {
         return MakeAdagradRule<float>(adagrad, n, l);
       }},
  };
}

// An embedding table's rows that no sample touched have a zero gradient:
// Adagrad must leave their values and sums exactly as they were, as
// PyTorch's sparse Adagrad does, so dense and sparse tables train alike.
TEST(UpdateRuleTest, AdagradLeavesZeroGradientElementsUntouched) {
  AdagradOptions options;
  options.initial_accumulator_value = 0.25;
  std::unique_ptr<UpdateRule<float>> rule = MakeAdagradRule<float>(options, 4);
  std::vector<float> p = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> g = {0.0f, 0.5f, 0.0f, -1.0f};
  rule->Step(absl::MakeSpan(p), g, 0.1);
  EXPECT_EQ(p[0], 1.0f);
  EXPECT_EQ(p[2], 3.0f);
  const BasicTensor<float>& sum = *rule->State()[0];
  EXPECT_EQ(sum[0], 0.25f);
  EXPECT_EQ(sum[1], 0.5f);  // 0.25 + 0.5^2
  EXPECT_FLOAT_EQ(p[1], -2.0f - 0.1f * 0.5f / (std::sqrt(0.5f) + 1e-10f));
  EXPECT_EQ((*rule->State()[1])[0], 1.0f);  // steps taken
}

TEST(UpdateRuleTest, SliceCountDoesNotChangeOneBit) {
  for (const auto& [name, make] : EveryRule()) {
    const std::vector<float> one = SteppedBySlices(make, 1, 4);
    for (int slices : {2, 3, 5}) {
      EXPECT_EQ(SteppedBySlices(make, slices, 4), one)
          << name << " with " << slices << " slices";
    }
  }
}

TEST(UpdateRuleTest, StepIsBothPassesOverTheRulesOwnElements) {
  for (const auto& [name, make] : EveryRule()) {
    const std::vector<ParamTensor> tensors = Tensors();
    const int64_t n = tensors.back().end;
    std::unique_ptr<UpdateRule<float>> rule =
        make(n, MakeRuleLayout(tensors, 0, n));
    std::vector<float> p(n), g(n);
    for (int64_t i = 0; i < n; ++i) p[i] = std::sin(0.37 * i) * 0.5;
    for (int step = 0; step < 4; ++step) {
      for (int64_t i = 0; i < n; ++i) g[i] = std::cos(0.11 * i + step) * 0.1;
      rule->Step(absl::MakeSpan(p), g, 0.01);
    }
    EXPECT_EQ(p, SteppedBySlices(make, 1, 4)) << name;
  }
}

TEST(UpdateRuleTest, ExcludedTensorsGetNoDecay) {
  // Zero gradients: only decay moves a parameter.
  SgdOptions sgd;
  sgd.weight_decay = 0.5;
  const std::vector<ParamTensor> tensors =
      ParamTensorsOf({16, 16}, {false, true});
  std::unique_ptr<UpdateRule<float>> rule =
      MakeSgdRule<float>(sgd, 32, MakeRuleLayout(tensors, 0, 32));
  std::vector<float> p(32, 1.0f);
  const std::vector<float> g(32, 0.0f);
  rule->Step(absl::MakeSpan(p), g, 0.5);
  EXPECT_EQ(p[0], 0.75f);
  EXPECT_EQ(p[16], 1.0f);
}

TEST(UpdateRuleTest, LayoutCutsTensorsOnBlockMultiples) {
  const std::vector<ParamTensor> tensors =
      ParamTensorsOf({kNormBlock + 16, 2 * kNormBlock}, {});
  const RuleLayout whole = MakeRuleLayout(tensors, 0, 3 * kNormBlock + 16);
  ASSERT_EQ(whole.num_pieces, 5);
  EXPECT_EQ(whole.num_tensors, 2);
  EXPECT_EQ(whole.segments[1].begin, kNormBlock);
  EXPECT_EQ(whole.segments[1].end, kNormBlock + 16);
  EXPECT_EQ(whole.segments[2].end, 2 * kNormBlock);
  EXPECT_EQ(whole.segments[2].tensor, 1);
  // A slice: the same piece numbers, offsets from its first element.
  const RuleLayout slice =
      MakeRuleLayout(tensors, 2 * kNormBlock, 3 * kNormBlock + 16);
  ASSERT_EQ(slice.segments.size(), 2u);
  EXPECT_EQ(slice.segments[0].begin, 0);
  EXPECT_EQ(slice.segments[0].piece, 3);
  EXPECT_EQ(slice.num_pieces, 5);
}

TEST(UpdateRuleTest, TrustRatioIsOneWhereANormIsZero) {
  // A zero tensor under LAMB with zero weight decay: ||p|| = 0, so the
  // ratio is 1 and the step is the plain Adam-like update.
  LambOptions lamb;
  std::unique_ptr<UpdateRule<double>> rule = MakeLambRule<double>(lamb, 4);
  std::vector<double> p(4, 0.0);
  const std::vector<double> g = {1, -1, 2, 0};
  rule->Step(absl::MakeSpan(p), g, 0.1);
  // m_hat = g, v_hat = g^2: u = g / (|g| + eps).
  EXPECT_NEAR(p[0], -0.1, 1e-6);
  EXPECT_NEAR(p[1], 0.1, 1e-6);
  EXPECT_EQ(p[3], 0.0);
  EXPECT_EQ(TrustRatio(0, 2, true), 1.0);
  EXPECT_EQ(TrustRatio(3, 0, false), 1.0);
  EXPECT_EQ(TrustRatio(3, 2, false), 1.5);
}

// A checkpoint's state written into a fresh rule continues the run as if
// never interrupted.
TEST(UpdateRuleTest, StateRoundTripContinuesExactly) {
  for (const auto& [name, make] : EveryRule()) {
    const std::vector<ParamTensor> tensors = Tensors();
    const int64_t n = tensors.back().end;
    const RuleLayout layout = MakeRuleLayout(tensors, 0, n);
    std::unique_ptr<UpdateRule<float>> a = make(n, layout);
    std::vector<float> p(n), g(n);
    for (int64_t i = 0; i < n; ++i) p[i] = std::sin(0.37 * i) * 0.5;
    auto grads = [&](int step) {
      for (int64_t i = 0; i < n; ++i) g[i] = std::cos(0.11 * i + step) * 0.1;
    };
    for (int step = 0; step < 3; ++step) {
      grads(step);
      a->Step(absl::MakeSpan(p), g, 0.01);
    }
    std::unique_ptr<UpdateRule<float>> b = make(n, layout);
    ASSERT_EQ(a->State().size(), b->State().size()) << name;
    EXPECT_FALSE(a->State().empty()) << name;
    for (size_t k = 0; k < a->State().size(); ++k) {
      b->State()[k]->CopyFrom(*a->State()[k]);
    }
    std::vector<float> q = p;
    for (int step = 3; step < 6; ++step) {
      grads(step);
      a->Step(absl::MakeSpan(p), g, 0.01);
      b->Step(absl::MakeSpan(q), g, 0.01);
    }
    EXPECT_EQ(p, q) << name;
  }
}

}  // namespace
}  // namespace cohort
