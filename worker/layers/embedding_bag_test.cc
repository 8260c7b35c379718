// embedding_bag: row ids as pairs of floats, the gather and the
// scatter-add against hand-computed values, the tables' names, shapes and
// initialisation, gradients against finite differences, float against
// double, rows past 2^24, the refusals, and sparse tables (fetched by row)
// against dense ones. Its agreement with PyTorch's
// nn.EmbeddingBag is tests/recsys_torch_test.
#include "worker/layers/embedding_bag.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sparse_rows.h"
#include "gtest/gtest.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

// A layer with its own parameter store, its tables filled by `value(t, i)`.
template <typename T>
struct Bag {
  Bag(std::vector<int64_t> rows, int64_t dim)
      : layer(std::move(rows), dim, EmbeddingBagMode::kSum) {}

  void Build(const Shape& in) {
    ASSERT_TRUE(layer.Configure(in).ok());
    Layer<T>* list[] = {&layer};
    store.Build(list);
  }
  T* table(size_t t) {
    return store.values().data() + store.entries()[t].offset;
  }
  T* grad(size_t t) { return store.grads().data() + store.entries()[t].offset; }

  EmbeddingBag<T> layer;
  ParamStore<T> store;
};

// Sample-major pairs (hi, lo) of `rows` ({N, T} row ids).
template <typename T>
BasicTensor<T> Ids(const std::vector<std::vector<int64_t>>& rows) {
  const int64_t n = rows.size(), tables = rows[0].size();
  BasicTensor<T> x({n, 2 * tables});
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t t = 0; t < tables; ++t) {
      x[s * 2 * tables + 2 * t] = static_cast<T>(rows[s][t] >> 24);
      x[s * 2 * tables + 2 * t + 1] = static_cast<T>(rows[s][t] & 0xFFFFFF);
    }
  }
  return x;
}

TEST(DecodeRowId, PairsOfExactIntegersBelowTwoToThe24) {
  EXPECT_EQ(DecodeRowId<float>(0, 0), 0);
  EXPECT_EQ(DecodeRowId<float>(0, 16777215), 16777215);
  EXPECT_EQ(DecodeRowId<float>(1, 0), int64_t{1} << 24);
  EXPECT_EQ(DecodeRowId<float>(3, 7), (int64_t{3} << 24) + 7);
  EXPECT_EQ(DecodeRowId<double>(16777215, 16777215), (int64_t{1} << 48) - 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [hi, lo] : std::vector<std::pair<float, float>>{{-1, 0},
                                                            {0, -1},
                                                            {0, 16777216},
                                                            {16777216, 0},
                                                            {0.5f, 0},
                                                            {0, 2.25f},
                                                            {nan, 0},
                                                            {0, nan}}) {
    EXPECT_EQ(DecodeRowId<float>(hi, lo), -1) << hi << ", " << lo;
  }
  EXPECT_EQ(DecodeRowId<double>(0, 16777216), -1);
}

TEST(DecodeRowIds, TableMajorRowsOrAnErrorNamingTheFeature) {
  const std::vector<int64_t> tables = {10, 20};
  const Tensor x = Ids<float>({{3, 19}, {9, 0}});
  std::vector<int64_t> rows(4);
  ASSERT_TRUE(DecodeRowIds(x.data(), 2, tables, rows.data()).ok());
  EXPECT_EQ(rows, (std::vector<int64_t>{3, 9, 19, 0}));

  const Tensor past = Ids<float>({{3, 19}, {9, 20}});
  absl::Status s = DecodeRowIds(past.data(), 2, tables, rows.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "sample 1, categorical feature 1: row 20 is past its table's 20 "
            "rows (rows[1])");
  Tensor bad = Ids<float>({{3, 19}, {9, 0}});
  bad[1] = 2.5f;
  s = DecodeRowIds(bad.data(), 2, tables, rows.data());
  EXPECT_EQ(s.message(),
            "sample 0, categorical feature 0: the pair (0, 2.5) is not a row "
            "id (two integers in [0, 2^24): row / 2^24, row mod 2^24)");
}

TEST(EmbeddingBag, DeclaresOneTablePerFeatureNamedAsAModuleList) {
  EmbeddingBag<float> layer({5, 100, 7}, 4, EmbeddingBagMode::kMean);
  const absl::StatusOr<Shape> out = layer.Configure({6});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, (Shape{12}));
  EXPECT_EQ(layer.Name(), "embedding_bag(3 tables, dim 4, mean)");
  EXPECT_EQ(layer.rows(), (std::vector<int64_t>{5, 100, 7}));
  const std::vector<ParamDecl> p = layer.Params();
  ASSERT_EQ(p.size(), 3u);
  const std::vector<int64_t> rows = {5, 100, 7};
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(p[t].name, std::to_string(t) + ".weight");
    EXPECT_EQ(p[t].shape, (Shape{rows[t], 4}));
    EXPECT_EQ(p[t].init, ParamDecl::Init::kRowUniform);
    EXPECT_FALSE(p[t].sparse);
    EXPECT_EQ(p[t].fan_in, rows[t]);
  }
}

TEST(EmbeddingBag, InitialisesEachTableWithinOneOverSqrtRows) {
  Bag<float> bag({4, 400}, 8);
  bag.Build({4});
  Rng rng(7);
  bag.store.Initialize(rng);
  for (size_t t = 0; t < 2; ++t) {
    const int64_t n = bag.layer.rows()[t] * 8;
    const double bound =
        1 / std::sqrt(static_cast<double>(bag.layer.rows()[t]));
    double largest = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(std::abs(bag.table(t)[i]), bound);
      largest =
          std::max(largest, std::abs(static_cast<double>(bag.table(t)[i])));
    }
    // Uniform over the whole interval, not a narrower one.
    EXPECT_GT(largest, 0.9 * bound) << "table " << t;
  }
}

TEST(EmbeddingBag, GathersRowsAndScatterAddsInSampleOrder) {
  // Tables {3, 2} x dim 2; table t row r holds (100 t + 10 r, 100 t + 10 r +
  // 1).
  Bag<double> bag({3, 2}, 2);
  bag.Build({4});
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < bag.layer.rows()[t]; ++r) {
      bag.table(t)[r * 2] = 100 * t + 10 * r;
      bag.table(t)[r * 2 + 1] = 100 * t + 10 * r + 1;
    }
  }
  const TensorD x = Ids<double>({{2, 1}, {0, 1}, {2, 0}});
  TensorD y;
  bag.layer.Forward(x, &y, Mode::kTrain);
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  const double want[] = {20, 21, 110, 111, 0, 1, 110, 111, 20, 21, 100, 101};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(y[i], want[i]) << i;

  TensorD dy({3, 4}), dx;
  for (int i = 0; i < 12; ++i) dy[i] = i + 1;
  // Something stale in the gradient must not survive.
  for (int64_t i = 0; i < bag.store.grads().size(); ++i)
    bag.store.grads()[i] = 9;
  bag.layer.Backward(dy, &dx);
  // Table 0: row 2 gets samples 0 and 2 ((1, 2) + (9, 10)), row 0 sample 1.
  const double want0[] = {5, 6, 0, 0, 10, 12};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bag.grad(0)[i], want0[i]) << i;
  // Table 1: row 1 gets samples 0 and 1, row 0 sample 2.
  const double want1[] = {11, 12, 3 + 7, 4 + 8};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bag.grad(1)[i], want1[i]) << i;
  ASSERT_EQ(dx.shape(), x.shape());
  for (int64_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx[i], 0) << i;
}

// loss = sum(y * R) is linear in the tables: central differences give the
// gradient up to rounding.
TEST(EmbeddingBag, GradientsMatchFiniteDifferences) {
  Bag<double> bag({6, 3, 9}, 5);
  bag.Build({6});
  Rng rng(3);
  bag.store.Initialize(rng);
  std::uniform_int_distribution<int64_t> pick(0, 1 << 20);
  std::vector<std::vector<int64_t>> rows(7, std::vector<int64_t>(3));
  for (auto& sample : rows) {
    for (int t = 0; t < 3; ++t) sample[t] = pick(rng) % bag.layer.rows()[t];
  }
  const TensorD x = Ids<double>(rows);
  TensorD y, r({7, 15}), dx;
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < r.size(); ++i) r[i] = normal(rng);
  bag.layer.Forward(x, &y, Mode::kTrain);
  bag.layer.Backward(r, &dx);
  const TensorD analytic = bag.store.grads().Clone();
  auto loss = [&] {
    bag.layer.Forward(x, &y, Mode::kTrain);
    double s = 0;
    for (int64_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  double* v = bag.store.values().data();
  for (const auto& e : bag.store.entries()) {
    for (int64_t i = e.offset; i < e.offset + NumElements(e.shape); ++i) {
      const double saved = v[i], h = 1e-6;
      v[i] = saved + h;
      const double lp = loss();
      v[i] = saved - h;
      const double lm = loss();
      v[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      ASSERT_NEAR(analytic[i], numeric, 1e-7 + 1e-6 * std::abs(numeric))
          << e.name << " element " << i - e.offset;
    }
  }
}

TEST(EmbeddingBag, FloatAndDoubleAgree) {
  Bag<float> f({11, 4}, 3);
  Bag<double> d({11, 4}, 3);
  f.Build({4});
  d.Build({4});
  Rng rng(5);
  f.store.Initialize(rng);
  for (int64_t i = 0; i < f.store.values().size(); ++i) {
    d.store.values()[i] = f.store.values()[i];
  }
  const std::vector<std::vector<int64_t>> rows = {
      {10, 3}, {0, 3}, {10, 0}, {5, 1}};
  Tensor yf, dyf({4, 6}), dxf;
  TensorD yd, dyd({4, 6}), dxd;
  for (int i = 0; i < 24; ++i) dyd[i] = dyf[i] = 0.1f * i - 1;
  f.layer.Forward(Ids<float>(rows), &yf, Mode::kTrain);
  d.layer.Forward(Ids<double>(rows), &yd, Mode::kTrain);
  f.layer.Backward(dyf, &dxf);
  d.layer.Backward(dyd, &dxd);
  for (int64_t i = 0; i < yf.size(); ++i) EXPECT_EQ(yf[i], yd[i]) << i;
  for (int64_t i = 0; i < f.store.grads().size(); ++i) {
    EXPECT_NEAR(f.store.grads()[i], d.store.grads()[i], 1e-6) << i;
  }
}

// A table of 2^24 + 8 rows (64 MB in float): rows at and past 2^24 travel
// as (1, lo) and land on their own rows.
TEST(EmbeddingBag, RowsPastTwoToThe24) {
  const int64_t rows = (int64_t{1} << 24) + 8;
  Bag<float> bag({rows}, 1);
  bag.Build({2});
  float* table = bag.table(0);
  for (int64_t r : {int64_t{16777215}, int64_t{16777216}, rows - 1}) {
    table[r] = static_cast<float>(r % 1000);  // 215, 216, 223
  }
  const Tensor x = Ids<float>({{16777215}, {16777216}, {rows - 1}, {rows - 1}});
  EXPECT_EQ(x[2], 1);
  EXPECT_EQ(x[3], 0);
  Tensor y, dy({4, 1});
  bag.layer.Forward(x, &y, Mode::kTrain);
  EXPECT_EQ(y[0], 215);
  EXPECT_EQ(y[1], 216);
  EXPECT_EQ(y[2], 223);
  EXPECT_EQ(y[3], 223);
  dy[0] = 1;
  dy[1] = 2;
  dy[2] = 4;
  dy[3] = 8;
  bag.layer.Backward(dy, nullptr);
  const float* g = bag.grad(0);
  EXPECT_EQ(g[16777215], 1);
  EXPECT_EQ(g[16777216], 2);
  EXPECT_EQ(g[rows - 1], 12);
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[rows - 2], 0);
}

TEST(EmbeddingBag, RefusesInputsThatAreNotItsIds) {
  EmbeddingBag<float> layer({10, 10, 10}, 4, EmbeddingBagMode::kSum);
  for (const Shape& in : {Shape{3}, Shape{7}, Shape{6, 1}}) {
    const absl::StatusOr<Shape> out = layer.Configure(in);
    ASSERT_FALSE(out.ok()) << ShapeString(in);
    EXPECT_EQ(out.status().message(),
              "embedding_bag(3 tables, dim 4, sum): expects a flat input {6} "
              "(a pair of floats per feature's row id) but got " +
                  ShapeString(in));
  }
  EmbeddingBag<float> empty({10, 0}, 4, EmbeddingBagMode::kSum);
  EXPECT_FALSE(empty.Configure({4}).ok());
}

// A bad id does not crash: the layer computes with row 0 in its place and
// says what was wrong (InputError), so the step fails with that message;
// the next good batch clears it.
TEST(EmbeddingBag, AnIdPastItsTableIsAnInputErrorNamingTheFeature) {
  Bag<float> bag({10, 5}, 2);
  bag.Build({4});
  Tensor y;
  bag.layer.Forward(Ids<float>({{9, 4}, {3, 5}}), &y, Mode::kEval);
  EXPECT_EQ(bag.layer.InputError().message(),
            "embedding_bag(2 tables, dim 2, sum): sample 1, categorical "
            "feature 1: row 5 is past its table's 5 rows (rows[1]) (the "
            "sample counted within its batch)");
  EXPECT_EQ(bag.layer.InputError().code(), absl::StatusCode::kInvalidArgument);
  bag.layer.Forward(Ids<float>({{9, 4}, {3, 2}}), &y, Mode::kEval);
  EXPECT_TRUE(bag.layer.InputError().ok());
}

// Serves rows from dense copies of the tables and records what was asked.
class DenseFetcher : public RowFetcher {
 public:
  absl::Status Fetch(absl::Span<const RowRequest> requests) override {
    ++calls;
    if (!fail.ok()) return fail;
    for (const RowRequest& r : requests) {
      const std::vector<float>& table = tables[r.table];
      asked.push_back(std::vector<int64_t>(r.ids.begin(), r.ids.end()));
      for (size_t i = 0; i < r.ids.size(); ++i) {
        std::copy(table.begin() + r.ids[i] * dim,
                  table.begin() + (r.ids[i] + 1) * dim, r.values + i * dim);
      }
    }
    return absl::OkStatus();
  }
  std::vector<std::vector<float>> tables;
  int64_t dim = 0;
  int calls = 0;
  std::vector<std::vector<int64_t>> asked;
  absl::Status fail;
};

TEST(EmbeddingBag, SparseTablesStartAsDenseOnesDoAndLeaveTheFlatBuffer) {
  Bag<float> dense({5, 300}, 3);
  dense.Build({4});
  EmbeddingBag<float> sparse({5, 300}, 3, EmbeddingBagMode::kSum, true);
  ASSERT_TRUE(sparse.Configure({4}).ok());
  EXPECT_EQ(sparse.Name(), "embedding_bag(2 sparse tables, dim 3, sum)");
  ParamStore<float> store;
  Layer<float>* list[] = {&sparse};
  store.Build(list);
  EXPECT_TRUE(store.entries().empty());
  EXPECT_EQ(store.num_parameters(), 0);
  ASSERT_EQ(store.sparse_entries().size(), 2u);
  EXPECT_EQ(store.sparse_entries()[1].name, "0.1.weight");
  EXPECT_EQ(store.sparse_entries()[1].shape, (Shape{300, 3}));
  Rng a(5), b(5);
  dense.store.Initialize(a);
  store.Initialize(b);
  for (size_t t = 0; t < 2; ++t) {
    const ParamStore<float>::SparseEntry& e = store.sparse_entries()[t];
    std::vector<float> row(3);
    for (int64_t r : {int64_t{0}, e.shape[0] - 1}) {
      SparseRowInit(e.seed, r, 3, 1 / std::sqrt(double(e.shape[0])),
                    row.data());
      for (int d = 0; d < 3; ++d) {
        EXPECT_EQ(row[d], dense.table(t)[r * 3 + d]) << t << " " << r;
      }
    }
  }
}

TEST(EmbeddingBag, SparseForwardAndBackwardEqualTheDenseLayers) {
  Bag<float> dense({6, 9}, 2);
  dense.Build({4});
  Rng rng(3);
  dense.store.Initialize(rng);
  EmbeddingBag<float> sparse({6, 9}, 2, EmbeddingBagMode::kSum, true);
  ASSERT_TRUE(sparse.Configure({4}).ok());
  DenseFetcher fetcher;
  fetcher.dim = 2;
  std::vector<SparseTable*> tables;
  sparse.CollectSparseTables(&tables);
  ASSERT_EQ(tables.size(), 2u);
  for (int t = 0; t < 2; ++t) {
    tables[t]->set_id(t);
    tables[t]->set_fetcher(&fetcher);
    fetcher.tables.emplace_back(dense.table(t),
                                dense.table(t) + dense.layer.rows()[t] * 2);
  }
  const Tensor x = Ids<float>({{5, 1}, {0, 8}, {5, 8}, {2, 1}});
  Tensor out_dense, out_sparse;
  dense.layer.Forward(x, &out_dense, Mode::kTrain);
  sparse.Forward(x, &out_sparse, Mode::kTrain);
  ASSERT_TRUE(sparse.InputError().ok()) << sparse.InputError();
  EXPECT_EQ(fetcher.calls, 1);  // one call for all tables
  EXPECT_EQ(fetcher.asked[0], (std::vector<int64_t>{0, 2, 5}));
  EXPECT_EQ(fetcher.asked[1], (std::vector<int64_t>{1, 8}));
  ASSERT_EQ(out_sparse.size(), out_dense.size());
  for (int64_t i = 0; i < out_dense.size(); ++i) {
    EXPECT_EQ(out_sparse[i], out_dense[i]) << i;
  }
  Tensor g({4, 4});
  for (int64_t i = 0; i < g.size(); ++i) g[i] = 0.25f * (i + 1);
  dense.layer.Backward(g, nullptr);
  sparse.Backward(g, nullptr);
  for (int t = 0; t < 2; ++t) {
    const SparseTable& st = *tables[t];
    ASSERT_EQ(st.grads.size(), st.ids.size() * 2);
    for (size_t i = 0; i < st.ids.size(); ++i) {
      for (int d = 0; d < 2; ++d) {
        EXPECT_EQ(st.grads[i * 2 + d], dense.grad(t)[st.ids[i] * 2 + d])
            << "table " << t << " row " << st.ids[i];
      }
    }
  }
}

TEST(EmbeddingBag, AFailedFetchIsTheStepsErrorNamingTheLayer) {
  EmbeddingBag<float> sparse({4}, 2, EmbeddingBagMode::kSum, true);
  ASSERT_TRUE(sparse.Configure({2}).ok());
  Tensor out;
  sparse.Forward(Ids<float>({{1}}), &out, Mode::kEval);
  EXPECT_EQ(sparse.InputError().code(), absl::StatusCode::kFailedPrecondition)
      << sparse.InputError();
  DenseFetcher fetcher;
  fetcher.fail = absl::UnavailableError("shard 1 at h:1 is down");
  std::vector<SparseTable*> tables;
  sparse.CollectSparseTables(&tables);
  tables[0]->set_fetcher(&fetcher);
  sparse.Forward(Ids<float>({{1}}), &out, Mode::kEval);
  EXPECT_EQ(sparse.InputError().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(sparse.InputError().message().find("embedding_bag(1 sparse"),
            std::string::npos)
      << sparse.InputError();
  EXPECT_NE(sparse.InputError().message().find("shard 1 at h:1"),
            std::string::npos);
}

}  // namespace
}  // namespace cohort
