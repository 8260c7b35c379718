// The row-wise rules' own contract: MergeRows' order and determinism, each
// rule by hand on a tiny table, sparse Adagrad against the dense rule bit
// for bit, and what is refused. Against PyTorch 1.13 itself:
// tests/sparse_optim_torch_test.sh.
#include "kernels/sparse_update_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/update_options.h"
#include "gtest/gtest.h"
#include "kernels/update_rules.h"

namespace cohort {
namespace {

std::unique_ptr<SparseUpdateRule> Make(const RuleOptions& options, int64_t rows,
                                       int64_t dim) {
  absl::StatusOr<std::unique_ptr<SparseUpdateRule>> rule =
      MakeSparseUpdateRule(options, rows, dim);
  EXPECT_TRUE(rule.ok()) << rule.status();
  return rule.ok() ? std::move(*rule) : nullptr;
}

TEST(MergeRowsTest, SumsRepeatsIntoAscendingRows) {
  const std::vector<int64_t> ids = {5, 2, 5, 0, 2, 5};
  const std::vector<float> grads = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60};
  std::vector<int64_t> rows = {99};
  std::vector<float> summed = {99};
  MergeRows(ids, grads.data(), 2, &rows, &summed);
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 2, 5}));
  EXPECT_EQ(summed, (std::vector<float>{4, 40, 7, 70, 10, 100}));
}

TEST(MergeRowsTest, SumsInOrderOfAppearance) {
  // (1e8 + 1) - 1e8 is 0 in float, 1e8 - 1e8 + 1 would be 1.
  const std::vector<int64_t> ids = {7, 3, 7, 7};
  const std::vector<float> grads = {1e8f, 5.0f, 1.0f, -1e8f};
  std::vector<int64_t> rows;
  std::vector<float> summed;
  MergeRows(ids, grads.data(), 1, &rows, &summed);
  EXPECT_EQ(rows, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(summed, (std::vector<float>{5.0f, 0.0f}));
}

TEST(MergeRowsTest, EmptyAndBitIdenticalOnRepeat) {
  std::vector<int64_t> rows = {1};
  std::vector<float> summed = {1};
  MergeRows({}, nullptr, 4, &rows, &summed);
  EXPECT_TRUE(rows.empty());
  EXPECT_TRUE(summed.empty());

  std::mt19937 gen(7);
  std::uniform_int_distribution<int64_t> id(0, 99);
  std::normal_distribution<float> value(0, 1e3);
  std::vector<int64_t> ids(2000);
  std::vector<float> grads(ids.size() * 3);
  for (int64_t& i : ids) i = id(gen);
  for (float& g : grads) g = value(gen);
  std::vector<int64_t> rows2;
  std::vector<float> summed2;
  MergeRows(ids, grads.data(), 3, &rows, &summed);
  MergeRows(ids, grads.data(), 3, &rows2, &summed2);
  EXPECT_EQ(rows, rows2);
  ASSERT_EQ(summed.size(), summed2.size());
  EXPECT_EQ(0, std::memcmp(summed.data(), summed2.data(),
                           summed.size() * sizeof(float)));
}

TEST(SparseSgdTest, StepsOnlyGivenRows) {
  RuleOptions o;
  o.kind = RuleKind::kSgd;
  auto rule = Make(o, 3, 2);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->state_per_row(), 0);
  std::vector<float> table = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> rows = {0, 2};
  const std::vector<float> grads = {2, -4, 8, 1};
  ASSERT_TRUE(rule->Step(table.data(), 2, rows, grads.data(), 0.5).ok());
  EXPECT_EQ(table, (std::vector<float>{0, 4, 3, 4, 1, 5.5}));
  EXPECT_EQ(rule->steps(), 1);
}

TEST(SparseAdagradTest, ByHandWithDecayAndInitialSum) {
  RuleOptions o;
  o.kind = RuleKind::kAdagrad;
  o.adagrad.lr_decay = 0.5;
  o.adagrad.initial_accumulator_value = 5;
  o.adagrad.eps = 0;
  auto rule = Make(o, 2, 1);
  ASSERT_NE(rule, nullptr);
  std::vector<float> table = {1, 1};
  const float g0 = 2, g1 = -3;
  const std::vector<int64_t> row0 = {0}, row1 = {1};
  // Step 1: clr 0.75, sum 5 + 4 = 9: p0 = 1 - 0.75 * 2 / 3 = 0.5.
  ASSERT_TRUE(rule->Step(table.data(), 1, row0, &g0, 0.75).ok());
  EXPECT_EQ(table[0], 0.5f);
  EXPECT_EQ(rule->State(0)[0], 9.0f);
  // Step 2 touches only row 1, but advances the count: clr 0.75 / 1.5.
  ASSERT_TRUE(rule->Step(table.data(), 1, row1, &g1, 0.75).ok());
  EXPECT_EQ(table[0], 0.5f);
  EXPECT_EQ(rule->State(0)[0], 9.0f);
  // sum 5 + 9 = 14: p1 = 1 + 0.5 * 3 / sqrt(14).
  EXPECT_FLOAT_EQ(table[1], 1 + 1.5f / std::sqrt(14.0f));
  EXPECT_EQ(rule->State(1)[0], 14.0f);
  // Step 3 on row 0 at clr 0.75 / 2: sum 13.
  ASSERT_TRUE(rule->Step(table.data(), 1, row0, &g0, 0.75).ok());
  EXPECT_FLOAT_EQ(table[0], 0.5f - 0.375f * 2 / std::sqrt(13.0f));
  EXPECT_EQ(rule->steps(), 3);
}

TEST(SparseAdamTest, LazyMomentsWithGlobalBiasCorrection) {
  RuleOptions o;
  o.kind = RuleKind::kAdam;
  o.adam.beta1 = 0.5;
  o.adam.beta2 = 0.75;
  o.adam.eps = 0;
  auto rule = Make(o, 2, 1);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->state_per_row(), 2);
  std::vector<float> table = {1, 1};
  const float g0 = 2, g1 = -1;
  const std::vector<int64_t> row0 = {0}, row1 = {1};
  // m = 1, v = 1, step size sqrt(0.25) / 0.5 = 1: p0 = 1 - 1 = 0.
  ASSERT_TRUE(rule->Step(table.data(), 1, row0, &g0, 1.0).ok());
  EXPECT_EQ(table[0], 0.0f);
  // Row 0 untouched: its value and moments stay (dense Adam would decay the
  // moments and move it). Row 1: m = -0.5, v = 0.25 at step 2.
  ASSERT_TRUE(rule->Step(table.data(), 1, row1, &g1, 1.0).ok());
  EXPECT_EQ(table[0], 0.0f);
  EXPECT_EQ(rule->State(0)[0], 1.0f);
  EXPECT_EQ(rule->State(0)[1], 1.0f);
  EXPECT_EQ(rule->State(1)[0], -0.5f);
  EXPECT_EQ(rule->State(1)[1], 0.25f);
  const double step_size = std::sqrt(1 - 0.5625) / 0.75;
  EXPECT_FLOAT_EQ(table[1], 1 + step_size * 0.5 / 0.5);
}

// Sparse Adagrad equals the dense rule, bit for bit, on every element when
// the dense gradient is the sparse one with zeros elsewhere.
TEST(SparseAdagradTest, BitIdenticalToDenseRule) {
  const int64_t kRows = 40, kDim = 13;  // 13: vector body and scalar tail
  AdagradOptions a;
  a.lr_decay = 0.01;
  a.initial_accumulator_value = 0.1;
  a.eps = 1e-10;
  RuleOptions o;
  o.kind = RuleKind::kAdagrad;
  o.adagrad = a;
  auto sparse = Make(o, kRows, kDim);
  ASSERT_NE(sparse, nullptr);
  auto dense = MakeAdagradRule<float>(a, kRows * kDim);
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> ts(kRows * kDim), td;
  for (float& x : ts) x = normal(gen);
  td = ts;
  for (int step = 0; step < 8; ++step) {
    std::vector<int64_t> ids(30);
    std::uniform_int_distribution<int64_t> id(0, kRows - 1);
    for (int64_t& i : ids) i = id(gen);
    std::vector<float> grads(ids.size() * kDim);
    for (float& g : grads) g = normal(gen);
    std::vector<int64_t> rows;
    std::vector<float> summed;
    MergeRows(ids, grads.data(), kDim, &rows, &summed);
    std::vector<float> full(kRows * kDim, 0.0f);
    for (size_t k = 0; k < rows.size(); ++k) {
      std::copy_n(summed.data() + k * kDim, kDim, full.data() + rows[k] * kDim);
    }
    ASSERT_TRUE(sparse->Step(ts.data(), kDim, rows, summed.data(), 0.1).ok());
    dense->Step(absl::MakeSpan(td), full, 0.1);
    ASSERT_EQ(0, std::memcmp(ts.data(), td.data(), ts.size() * sizeof(float)))
        << "step " << step;
    const float* dense_sum = dense->State()[0]->data();
    for (int64_t r = 0; r < kRows; ++r) {
      ASSERT_EQ(0, std::memcmp(sparse->State(r).data(), dense_sum + r * kDim,
                               kDim * sizeof(float)))
          << "row " << r << " step " << step;
    }
  }
}

// A store keeps rows at slots of its choosing: stepping them there with a
// rule for 0 rows gives the dense table's rows and state, bit for bit.
TEST(SparseUpdateRuleTest, StepSlotsEqualsStepOnTheSameRows) {
  const int64_t kRows = 30, kDim = 5;
  for (RuleKind kind : {RuleKind::kSgd, RuleKind::kAdagrad, RuleKind::kAdam}) {
    RuleOptions o;
    o.kind = kind;
    o.adagrad.initial_accumulator_value = 0.25;
    o.adagrad.lr_decay = 0.05;
    auto dense = Make(o, kRows, kDim);
    auto slotted = Make(o, 0, kDim);
    ASSERT_NE(dense, nullptr);
    ASSERT_NE(slotted, nullptr);
    const int spr = dense->state_per_row();
    EXPECT_EQ(slotted->state_per_row(), spr);
    std::mt19937 gen(11);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> table(kRows * kDim);
    for (float& x : table) x = normal(gen);
    // The store holds row r at slot kRows - 1 - r: reversed.
    std::vector<float> values(kRows * kDim), state(kRows * spr);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t slot = kRows - 1 - r;
      std::copy_n(table.data() + r * kDim, kDim, values.data() + slot * kDim);
      slotted->InitRowState(state.data() + slot * spr);
    }
    for (int step = 0; step < 6; ++step) {
      std::vector<int64_t> rows, slots;
      for (int64_t r = step % 3; r < kRows; r += 1 + step % 4) {
        rows.push_back(r);
        slots.push_back(kRows - 1 - r);
      }
      if (step == 2) {  // no rows: the step still counts
        rows.clear();
        slots.clear();
      }
      std::vector<float> grads(rows.size() * kDim);
      for (float& g : grads) g = normal(gen);
      ASSERT_TRUE(
          dense->Step(table.data(), kDim, rows, grads.data(), 0.1).ok());
      slotted->StepSlots(values.data(), state.data(), slots, grads.data(), 0.1);
      EXPECT_EQ(slotted->steps(), dense->steps());
    }
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t slot = kRows - 1 - r;
      ASSERT_EQ(0, std::memcmp(table.data() + r * kDim,
                               values.data() + slot * kDim, kDim * 4))
          << "kind " << static_cast<int>(kind) << " row " << r;
      ASSERT_EQ(0, std::memcmp(dense->State(r).data(),
                               state.data() + slot * spr, spr * 4))
          << "kind " << static_cast<int>(kind) << " row " << r;
    }
  }
}

TEST(SparseUpdateRuleTest, InitRowStateIsTheRulesFreshState) {
  RuleOptions o;
  o.kind = RuleKind::kAdagrad;
  o.adagrad.initial_accumulator_value = 0.5;
  auto adagrad = Make(o, 0, 3);
  ASSERT_NE(adagrad, nullptr);
  std::vector<float> state(3, -1.0f);
  adagrad->InitRowState(state.data());
  EXPECT_EQ(state, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  o.kind = RuleKind::kAdam;
  auto adam = Make(o, 0, 2);
  ASSERT_NE(adam, nullptr);
  state.assign(5, -1.0f);
  adam->InitRowState(state.data());
  EXPECT_EQ(state, (std::vector<float>{0, 0, 0, 0, -1}));
}

TEST(SparseUpdateRuleTest, BadRowsChangeNothing) {
  RuleOptions o;
  o.kind = RuleKind::kAdam;
  auto rule = Make(o, 4, 1);
  ASSERT_NE(rule, nullptr);
  std::vector<float> table = {1, 2, 3, 4};
  const std::vector<float> grads = {1, 1};
  const std::vector<std::vector<int64_t>> bad = {
      {0, 4}, {1, -1}, {2, 1}, {3, 3}};
  for (const auto& rows : bad) {
    const absl::Status s = rule->Step(table.data(), 1, rows, grads.data(), 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("position 1"), absl::string_view::npos) << s;
  }
  EXPECT_EQ(table, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(rule->steps(), 0);
  EXPECT_EQ(rule->State(0)[0], 0.0f);
}

TEST(SparseUpdateRuleTest, RefusesWhatPytorchRefuses) {
  struct Case {
    RuleOptions options;
    const char* name;
  };
  std::vector<Case> cases(9);
  cases[0].options.sgd.momentum = 0.9;
  cases[0].name = "momentum";
  cases[1].options.sgd.nesterov = true;
  cases[1].name = "nesterov";
  cases[2].options.sgd.weight_decay = 1e-4;
  cases[2].name = "weight_decay";
  cases[3].options.kind = RuleKind::kAdagrad;
  cases[3].options.adagrad.weight_decay = 1e-4;
  cases[3].name = "weight_decay";
  cases[4].options.kind = RuleKind::kAdam;
  cases[4].options.adam.weight_decay = 1e-4;
  cases[4].name = "weight_decay";
  cases[5].options.kind = RuleKind::kAdam;
  cases[5].options.adam.decoupled = true;
  cases[5].name = "AdamW";
  cases[6].options.kind = RuleKind::kRmsprop;
  cases[6].name = "RMSprop";
  cases[7].options.kind = RuleKind::kLamb;
  cases[7].name = "LAMB";
  cases[8].options.kind = RuleKind::kLars;
  cases[8].name = "LARS";
  for (const Case& c : cases) {
    const auto rule = MakeSparseUpdateRule(c.options, 10, 4);
    ASSERT_FALSE(rule.ok()) << c.name;
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(rule.status().message().find(c.name), absl::string_view::npos)
        << rule.status();
  }
  EXPECT_FALSE(MakeSparseUpdateRule(RuleOptions(), 10, 0).ok());
  EXPECT_FALSE(MakeSparseUpdateRule(RuleOptions(), -1, 4).ok());
}

}  // namespace
}  // namespace cohort
