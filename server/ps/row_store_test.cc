#include "server/ps/row_store.h"

#include <cstring>
#include <random>
#include <vector>

#include "common/sparse_rows.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/sparse_update_rules.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

SparseTableInfo Table(int64_t rows, int32_t dim) {
  SparseTableInfo t;
  t.set_id(0);
  t.set_name("emb.weight");
  t.set_rows(rows);
  t.set_dim(dim);
  t.set_seed(1234);
  t.set_bound(0.5);
  return t;
}

RuleOptions Options(RuleKind kind) {
  RuleOptions o;
  o.kind = kind;
  o.adagrad.initial_accumulator_value = 0.1;
  o.adagrad.lr_decay = 0.01;
  return o;
}

std::unique_ptr<RowStore> MakeStore(const SparseTableInfo& t, RuleKind kind) {
  auto store = RowStore::Make(t, Options(kind));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

std::vector<float> InitRow(const SparseTableInfo& t, int64_t row) {
  std::vector<float> v(t.dim());
  SparseRowInit(t.seed(), row, t.dim(), t.bound(), v.data());
  return v;
}

TEST(RowStoreTest, AbsentRowsReadAsTheirInitAndAreNotStored) {
  const SparseTableInfo t = Table(int64_t{1} << 40, 3);
  auto store = MakeStore(t, RuleKind::kAdagrad);
  ASSERT_NE(store, nullptr);
  const std::vector<int64_t> ids = {7, (int64_t{1} << 40) - 1, 7};
  std::vector<float> out(ids.size() * 3);
  store->Read(ids, out.data());
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(std::vector<float>(out.begin() + k * 3, out.begin() + k * 3 + 3),
              InitRow(t, ids[k]))
        << "row " << ids[k];
  }
  EXPECT_EQ(store->size(), 0);
}

TEST(RowStoreTest, SgdStepsNewRowsFromTheirInit) {
  const SparseTableInfo t = Table(100, 2);
  auto store = MakeStore(t, RuleKind::kSgd);
  ASSERT_NE(store, nullptr);
  const std::vector<int64_t> rows = {3, 50};
  const std::vector<float> grads = {1, 2, -4, 8};
  ASSERT_TRUE(store->Apply(rows, grads.data(), 0.5).ok());
  EXPECT_EQ(store->size(), 2);
  EXPECT_EQ(store->steps(), 1);
  std::vector<float> out(4);
  store->Read(rows, out.data());
  const std::vector<float> a = InitRow(t, 3), b = InitRow(t, 50);
  EXPECT_EQ(out, (std::vector<float>{a[0] - 0.5f, a[1] - 1.0f, b[0] + 2.0f,
                                     b[1] - 4.0f}));
}

// The store holds rows at slots in the order they came and grows its
// buffers many times over; the rows still equal the dense rule's table,
// bit for bit, untouched rows included.
TEST(RowStoreTest, EqualsTheDenseRuleOverManySteps) {
  const int64_t kRows = 5000;
  const int32_t kDim = 7;
  const SparseTableInfo t = Table(kRows, kDim);
  for (RuleKind kind : {RuleKind::kSgd, RuleKind::kAdagrad, RuleKind::kAdam}) {
    auto store = MakeStore(t, kind);
    ASSERT_NE(store, nullptr);
    auto dense = MakeSparseUpdateRule(Options(kind), kRows, kDim);
    ASSERT_TRUE(dense.ok()) << dense.status();
    std::vector<float> table(kRows * kDim);
    for (int64_t r = 0; r < kRows; ++r) {
      SparseRowInit(t.seed(), r, kDim, t.bound(), table.data() + r * kDim);
    }
    std::mt19937 gen(17);
    std::uniform_int_distribution<int64_t> id(0, kRows - 1);
    std::normal_distribution<float> normal(0, 1);
    for (int step = 0; step < 12; ++step) {
      std::vector<int64_t> ids(step == 4 ? 0 : 400);  // step 4: no rows
      for (int64_t& i : ids) i = id(gen);
      std::vector<float> grads(ids.size() * kDim);
      for (float& g : grads) g = normal(gen);
      std::vector<int64_t> rows;
      std::vector<float> summed;
      MergeRows(ids, grads.data(), kDim, &rows, &summed);
      ASSERT_TRUE(store->Apply(rows, summed.data(), 0.05).ok());
      ASSERT_TRUE(
          (*dense)->Step(table.data(), kDim, rows, summed.data(), 0.05).ok());
    }
    EXPECT_EQ(store->steps(), 12);
    EXPECT_GT(store->size(), 1000);
    std::vector<int64_t> all(kRows);
    for (int64_t r = 0; r < kRows; ++r) all[r] = r;
    std::vector<float> got(kRows * kDim);
    store->Read(all, got.data());
    ASSERT_EQ(0, std::memcmp(got.data(), table.data(), got.size() * 4))
        << "kind " << static_cast<int>(kind);
  }
}

TEST(RowStoreTest, BadRowsAreRefusedAndChangeNothing) {
  const SparseTableInfo t = Table(10, 1);
  auto store = MakeStore(t, RuleKind::kAdam);
  ASSERT_NE(store, nullptr);
  const std::vector<float> grads = {1, 1};
  const std::vector<std::vector<int64_t>> bad = {
      {2, 10}, {-1, 3}, {4, 4}, {5, 1}};
  for (const auto& rows : bad) {
    const absl::Status s = store->Apply(rows, grads.data(), 0.1);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("table 0 ('emb.weight')"));
  }
  EXPECT_EQ(store->size(), 0);
  EXPECT_EQ(store->steps(), 0);
}

TEST(RowStoreTest, CaptureAndRestoreAreExact) {
  const SparseTableInfo t = Table(1000, 4);
  auto a = MakeStore(t, RuleKind::kAdagrad);
  auto b = MakeStore(t, RuleKind::kAdagrad);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<float> g(12, 0.5f);
  ASSERT_TRUE(a->Apply({9, 400, 999}, g.data(), 0.1).ok());
  ASSERT_TRUE(a->Apply({5, 400}, g.data(), 0.1).ok());
  const RowStore::Contents c = a->Capture();
  EXPECT_EQ(c.ids, (std::vector<int64_t>{9, 400, 999, 5}));
  EXPECT_EQ(c.values.size(), 16u);
  EXPECT_EQ(c.state.size(), 16u);
  EXPECT_EQ(c.steps, 2);
  ASSERT_TRUE(b->Restore(c).ok());
  // Both go on alike: the state and the step count came along.
  ASSERT_TRUE(a->Apply({5, 6}, g.data(), 0.1).ok());
  ASSERT_TRUE(b->Apply({5, 6}, g.data(), 0.1).ok());
  const RowStore::Contents ca = a->Capture(), cb = b->Capture();
  EXPECT_EQ(ca.ids, cb.ids);
  EXPECT_EQ(ca.values, cb.values);
  EXPECT_EQ(ca.state, cb.state);
  EXPECT_EQ(ca.steps, cb.steps);
}

TEST(RowStoreTest, InconsistentContentsAreRefused) {
  const SparseTableInfo t = Table(100, 2);
  auto store = MakeStore(t, RuleKind::kAdagrad);
  ASSERT_NE(store, nullptr);
  const std::vector<float> g(2, 1.0f);
  ASSERT_TRUE(store->Apply({1}, g.data(), 0.1).ok());
  const RowStore::Contents good = store->Capture();
  struct Case {
    RowStore::Contents c;
    const char* says;
  };
  std::vector<Case> cases(5, Case{good, ""});
  cases[0].c.values.pop_back();
  cases[0].says = "values";
  cases[1].c.state.push_back(0);
  cases[1].says = "state";
  cases[2].c.ids[0] = 100;
  cases[2].says = "row id 100 is outside";
  cases[3].c.ids.push_back(1);
  cases[3].c.values.insert(cases[3].c.values.end(), 2, 0.0f);
  cases[3].c.state.insert(cases[3].c.state.end(), 2, 0.0f);
  cases[3].says = "row id 1 is stored twice";
  cases[4].c.steps = -1;
  cases[4].says = "negative";
  for (const Case& k : cases) {
    const absl::Status s = store->Restore(k.c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(k.says));
  }
  const RowStore::Contents after = store->Capture();
  EXPECT_EQ(after.ids, good.ids);
  EXPECT_EQ(after.values, good.values);
  EXPECT_EQ(after.steps, good.steps);
}

TEST(RowStoreTest, RulesWithoutRowWiseFormAreRefused) {
  RuleOptions o;
  o.sgd.momentum = 0.9;
  auto store = RowStore::Make(Table(10, 2), o);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("momentum"));
}

}  // namespace
}  // namespace cohort
