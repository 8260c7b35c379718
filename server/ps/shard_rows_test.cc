// A shard's sparse tables (shard_state.h): SYNC's averaged rows against the
// dense rule on a dense copy, SSP and ASYNC, reads of absent rows, a shard
// with tables only, the checks of Init, pushes and pulls, and statistics.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "client/ps_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/sparse_update_rules.h"
#include "server/ps/shard_rows_test_util.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using namespace rows_test;  // NOLINT: the shared test helpers

std::vector<float> Normal(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

std::vector<int64_t> AllRows(const SparseTableInfo& t) {
  std::vector<int64_t> ids(t.rows());
  for (int64_t r = 0; r < t.rows(); ++r) ids[r] = r;
  return ids;
}

// One rank's push of a step: the rows it pushes, per table.
using RankStep = std::vector<std::vector<int64_t>>;

// SYNC, two ranks of weights 2 and 1 pushing overlapping rows: the shard
// steps the weighted mean of each row with row-wise Adagrad, which equals a
// shard holding the tables as a dense partition stepped with the dense
// Adagrad rule on the same pushes with zeros for the rows not pushed, bit
// for bit, untouched rows included.
TEST(ShardRowsTest, SyncMeanOfOverlappingRowsEqualsTheDenseRule) {
  const std::vector<SparseTableInfo> tables = {Table(0, 12, 5),
                                               Table(1, 30, 3)};
  const std::vector<float> dense_init = {1, 2, 3, 4};
  // The dense copy: [the dense partition | table 0 | table 1].
  std::vector<float> flat = dense_init;
  for (const SparseTableInfo& t : tables) {
    const std::vector<float> rows = InitRows(t, AllRows(t));
    flat.insert(flat.end(), rows.begin(), rows.end());
  }
  ShardState sparse(Job(SYNC), 0), dense(Job(SYNC), 0);
  ASSERT_TRUE(Init(sparse, tables, 2, 3, 4, dense_init).ok());
  ASSERT_TRUE(Init(dense, {}, 2, 3, flat.size(), flat).ok());
  const std::vector<int64_t> offsets = {4, 4 + 12 * 5};
  std::mt19937 gen(5);
  const std::vector<std::vector<RankStep>> steps = {
      {{{1, 3, 5}, {0, 29}}, {{3, 4}, {}}},
      {{{}, {7}}, {{11, 0}, {7, 8}}},
      {{{}, {}}, {{}, {}}},  // no rows at all: still an update
      {{{2}, {29, 1}}, {{2, 3}, {29}}},
  };
  const std::vector<double> lrs = {0.1, 0.05, 0.1, 0.2};
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int rank = 0; rank < 2; ++rank) {
      const RankStep& rs = steps[s][rank];
      std::vector<float> dense_grad = Normal(4, gen);
      std::vector<float> full = dense_grad;
      full.resize(flat.size(), 0.0f);
      std::vector<RowChunk> chunks;
      for (int t = 0; t < 2; ++t) {
        const int32_t dim = tables[t].dim();
        const std::vector<float> g = Normal(rs[t].size() * dim, gen);
        for (size_t k = 0; k < rs[t].size(); ++k) {
          std::copy_n(g.data() + k * dim, dim,
                      full.data() + offsets[t] + rs[t][k] * dim);
        }
        if (!rs[t].empty()) chunks.push_back(Rows(t, rs[t], g));
      }
      const PushHeader h = Header(rank, s + 1, s, lrs[s], rank == 0 ? 2 : 1);
      auto a = Push(sparse, h, chunks, dense_grad);
      ASSERT_TRUE(a.ok()) << a.status();
      auto b = Push(dense, h, {}, full);
      ASSERT_TRUE(b.ok()) << b.status();
    }
  }
  auto want = dense.WaitForPull(0, steps.size(), absl::Now());
  auto got = sparse.WaitForPull(0, steps.size(), absl::Now());
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->version, 4);
  std::vector<float> have = *got->values[0];
  for (const SparseTableInfo& t : tables) {
    auto rows = PullRows(sparse, t.id(), AllRows(t), steps.size());
    ASSERT_TRUE(rows.ok()) << rows.status();
    have.insert(have.end(), rows->begin(), rows->end());
  }
  const std::vector<float>& expected = *want->values[0];
  ASSERT_EQ(have.size(), expected.size());
  for (size_t i = 0; i < have.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&have[i], &expected[i], 4))
        << "element " << i << ": " << have[i] << " vs " << expected[i];
  }
  // Table 0 rows 0 1 2 3 4 5 11, table 1 rows 0 1 7 8 29.
  EXPECT_EQ(sparse.Stats().rows_held(), 12);
}

// SSP and ASYNC step a push's rows at once, with the dense part's rate: lr
// times the push's share of a step (weight / total_replicas).
TEST(ShardRowsTest, SspAndAsyncStepRowsAtOnceWithTheScaledRate) {
  for (Consistency c : {SSP, ASYNC}) {
    ShardState state(Job(c, 1, OptimizerSpec::SGD), 0);
    const SparseTableInfo t = Table(0, 100, 2);
    ASSERT_TRUE(Init(state, {t}, 2, 4, 2, {1, 1}).ok());
    const std::vector<float> g = {4, -8, 2, 2};
    auto r =
        Push(state, Header(1, 1, 0, 0.5, 2, 0), {Rows(0, {40, 9}, g)}, {2, 2});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->version(), 1);
    const std::vector<float> init = InitRows(t, {40, 9});
    auto rows = PullRows(state, 0, {40, 9});
    ASSERT_TRUE(rows.ok()) << rows.status();
    // lr 0.5 * 2 / 4 = 0.25.
    EXPECT_EQ(*rows, (std::vector<float>{init[0] - 1, init[1] + 2,
                                         init[2] - 0.5f, init[3] - 0.5f}))
        << Consistency_Name(c);
    auto snap = state.WaitForPull(1, 0, absl::Now());
    ASSERT_TRUE(snap.ok());
    EXPECT_EQ(*snap->values[0], (std::vector<float>{0.5f, 0.5f}));
  }
}

TEST(ShardRowsTest, PullOfAbsentRowsReturnsTheirInitAndStoresNothing) {
  ShardState state(Job(ASYNC), 0);
  const SparseTableInfo t = Table(0, int64_t{1} << 40, 4);
  ASSERT_TRUE(Init(state, {t}, 1, 1).ok());
  const std::vector<int64_t> ids = {5, (int64_t{1} << 40) - 1, 5};
  auto rows = PullRows(state, 0, ids);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, InitRows(t, ids));
  const ShardStats st = state.Stats();
  EXPECT_EQ(st.rows_held(), 0);
  EXPECT_EQ(st.rows_pulled(), 3);
  EXPECT_EQ(st.bytes_pulled(), 3 * 8 + 3 * 4 * 4);
}

// Several shards and a small dense part: a shard may hold tables only.
TEST(ShardRowsTest, ShardWithTablesAndNoPartitions) {
  ShardState state(Job(SYNC, 2, OptimizerSpec::SGD), 1);
  const SparseTableInfo t = Table(0, 1000, 2);
  InitHeader empty;
  empty.set_worker_id("w0");
  empty.set_world_size(2);
  empty.set_total_replicas(2);
  auto refused = state.Init(empty, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("no partitions and no sparse tables"));
  ASSERT_TRUE(Init(state, {t}, 2, 2).ok());
  auto layout = state.CheckPush(Header(0, 1, 0, 0.1));
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(layout->empty());
  const std::vector<int64_t> mine = OwnedRows(0, 1, 2, 2);
  ASSERT_TRUE(
      Push(state, Header(0, 1, 0, 1.0), {Rows(0, {mine[0]}, {2, 4})}).ok());
  EXPECT_EQ(state.Stats().version(), 0);  // waits for rank 1
  ASSERT_TRUE(Push(state, Header(1, 1, 0, 1.0), {}).ok());
  // Step 1 has no rows at all and is applied all the same.
  ASSERT_TRUE(Push(state, Header(0, 2, 1, 1.0), {}).ok());
  ASSERT_TRUE(Push(state, Header(1, 2, 1, 1.0), {}).ok());
  auto snap = state.WaitForPull(0, 2, absl::Now());
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->version, 2);
  EXPECT_TRUE(snap->partitions.empty());
  auto rows = PullRows(state, 0, mine, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<float> want = InitRows(t, mine);
  want[0] -= 1.0f;  // the mean of 2 and nothing, at lr 1
  want[1] -= 2.0f;
  EXPECT_EQ(*rows, want);
}

// Every table's rule counts every update, rows or none: SparseAdam's bias
// correction at step 3 is the third step's, as for the dense rules.
TEST(ShardRowsTest, EveryTableStepsOncePerUpdateEvenWithoutRows) {
  ShardState state(Job(SYNC, 1, OptimizerSpec::ADAM), 0);
  const std::vector<SparseTableInfo> tables = {Table(0, 10, 3),
                                               Table(1, 10, 1)};
  ASSERT_TRUE(Init(state, tables, 1, 1).ok());
  RuleOptions o;
  o.kind = RuleKind::kAdam;
  o.adam.eps = 1e-8f;  // as the job's float fields round them
  o.adam.beta1 = 0.9f;
  o.adam.beta2 = 0.999f;
  auto rule = MakeSparseUpdateRule(o, 10, 3);
  ASSERT_TRUE(rule.ok());
  std::vector<int64_t> all = AllRows(tables[0]);
  std::vector<float> table = InitRows(tables[0], all);
  const std::vector<float> g = {1, -2, 0.5f};
  const std::vector<std::vector<int64_t>> rows = {{4}, {}, {4}};
  for (int s = 0; s < 3; ++s) {
    std::vector<RowChunk> chunks;
    if (!rows[s].empty()) chunks.push_back(Rows(0, rows[s], g));
    ASSERT_TRUE(Push(state, Header(0, s + 1, s, 0.01), chunks).ok());
    ASSERT_TRUE((*rule)->Step(table.data(), 3, rows[s], g.data(), 0.01).ok());
  }
  auto got = PullRows(state, 0, all, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(0, std::memcmp(got->data(), table.data(), table.size() * 4));
  auto capture = state.CaptureNow();
  ASSERT_TRUE(capture.ok());
  EXPECT_EQ(capture->rows[0].steps, 3);
  EXPECT_EQ(capture->rows[1].steps, 3);
  EXPECT_TRUE(capture->rows[1].ids.empty());
}

TEST(ShardRowsTest, BadRowPushesAreRefusedAndChangeNothing) {
  ShardState state(Job(SYNC, 2, OptimizerSpec::SGD), 0);
  const SparseTableInfo t = Table(0, 50, 2);
  ASSERT_TRUE(Init(state, {t}, 1, 1).ok());
  const std::vector<int64_t> mine = OwnedRows(0, 0, 2, 3);
  const int64_t theirs = OwnedRows(0, 1, 2, 1)[0];
  const std::vector<float> g2 = {1, 1}, g4 = {1, 1, 1, 1};
  struct Case {
    std::vector<RowChunk> rows;
    absl::StatusCode code;
    std::string says;
  };
  const absl::StatusCode bad = absl::StatusCode::kInvalidArgument;
  const std::vector<Case> cases = {
      {{Rows(0, {theirs}, g2)},
       bad,
       absl::StrCat("row id ", theirs,
                    " belongs to shard 1, not to this "
                    "shard 0")},
      {{Rows(0, {50}, g2)}, bad, "table 0 ('2.0.weight') row id 50 is outside"},
      {{Rows(0, {-1}, g2)}, bad, "row id -1 is outside"},
      {{Rows(0, {mine[0], mine[0]}, g4)},
       bad,
       absl::StrCat("row id ", mine[0], " is pushed twice")},
      {{Rows(0, {mine[0]}, g2), Rows(0, {mine[1], mine[0]}, g4)},
       bad,
       absl::StrCat("row id ", mine[0], " is pushed twice")},
      {{Rows(0, {mine[0]}, g4)}, bad, "has 16 bytes of data, not 8"},
      {{Rows(1, {mine[0]}, g2)}, bad, "unknown sparse table 1"},
      {{Rows(-1, {mine[0]}, g2)}, bad, "unknown sparse table -1"},
      {{Rows(0, mine, std::vector<float>(kMaxChunkBytes / 4 + 2))},
       absl::StatusCode::kResourceExhausted,
       "more than the limit"},
  };
  for (const Case& c : cases) {
    auto r = Push(state, Header(0, 1, 0, 0.1), c.rows);
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.says));
    EXPECT_THAT(r.status().message(), HasSubstr("push from rank 0"));
  }
  // ApplyPush checks again what a RowAssembler checks.
  PushedRows dup;
  dup.tables.resize(1);
  dup.tables[0].ids = {mine[1], mine[0], mine[1]};
  dup.tables[0].grads.assign(6, 1.0f);
  auto r = state.ApplyPush(Header(0, 1, 0, 0.1), {}, dup);
  EXPECT_THAT(r.status().message(),
              HasSubstr(absl::StrCat("row id ", mine[1], " is pushed twice")));
  PushedRows foreign = dup;
  foreign.tables[0].ids = {mine[0], theirs, mine[1]};
  r = state.ApplyPush(Header(0, 1, 0, 0.1), {}, foreign);
  EXPECT_THAT(r.status().message(), HasSubstr("belongs to shard 1"));
  PushedRows short_grads = dup;
  short_grads.tables[0].ids = {mine[0]};
  r = state.ApplyPush(Header(0, 1, 0, 0.1), {}, short_grads);
  EXPECT_THAT(r.status().message(), HasSubstr("6 gradient values"));
  PushedRows two_tables;
  two_tables.tables.resize(2);
  r = state.ApplyPush(Header(0, 1, 0, 0.1), {}, two_tables);
  EXPECT_THAT(r.status().message(), HasSubstr("rows for 2 sparse tables"));

  ShardStats st = state.Stats();
  EXPECT_EQ(st.pushes(), 0);
  EXPECT_EQ(st.rows_pushed(), 0);
  EXPECT_EQ(st.rows_held(), 0);
  EXPECT_EQ(st.version(), 0);
  // Seq 1 is still unused: the good push goes through.
  ASSERT_TRUE(Push(state, Header(0, 1, 0, 1.0), {Rows(0, {mine[2]}, g2)}).ok());
  auto rows = PullRows(state, 0, {mine[2]}, 1);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<float> want = InitRows(t, {mine[2]});
  EXPECT_EQ(*rows, (std::vector<float>{want[0] - 1, want[1] - 1}));
  EXPECT_EQ(state.Stats().rows_held(), 1);
}

TEST(ShardRowsTest, BadPullsAreRefused) {
  ShardState state(Job(ASYNC, 2, OptimizerSpec::SGD), 0);
  ASSERT_TRUE(Init(state, {Table(0, 50, 2)}, 1, 1).ok());
  const int64_t theirs = OwnedRows(0, 1, 2, 1)[0];
  EXPECT_THAT(PullRows(state, 0, {theirs}).status().message(),
              HasSubstr("belongs to shard 1"));
  EXPECT_THAT(PullRows(state, 0, {50}).status().message(),
              HasSubstr("row id 50 is outside"));
  EXPECT_THAT(PullRows(state, 3, {0}).status().message(),
              HasSubstr("unknown sparse table 3"));
  PullRowsRequest with_data;
  *with_data.add_tables() = Rows(0, {OwnedRows(0, 0, 2, 1)[0]}, {1, 2});
  EXPECT_THAT(state.PullRows(with_data, absl::Now()).status().message(),
              HasSubstr("carries data"));
  with_data.set_rank(5);
  EXPECT_THAT(state.PullRows(with_data, absl::Now()).status().message(),
              HasSubstr("rank is outside"));
  EXPECT_EQ(state.Stats().rows_pulled(), 0);
}

TEST(ShardRowsTest, PullRowsWaitsLikeAPull) {
  ShardState state(Job(SYNC, 1, OptimizerSpec::SGD), 0);
  auto before = PullRows(state, 0, {0});
  EXPECT_EQ(before.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(before.status().message(), HasSubstr("no Init"));
  ASSERT_TRUE(Init(state, {Table(0, 50, 2)}, 2, 2).ok());
  ASSERT_TRUE(Push(state, Header(0, 1, 0, 1.0), {}).ok());
  auto blocked = PullRows(state, 0, {0}, 1);
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(blocked.status().message(), HasSubstr("slowest rank(s) 1"));
  state.Shutdown();
  EXPECT_EQ(PullRows(state, 0, {0}, 1).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ShardRowsTest, InitChecksTablesAndTheirOptimizer) {
  struct Case {
    SparseTableInfo table;
    const char* says;
  };
  std::vector<Case> cases(8, Case{Table(0, 10, 2), ""});
  cases[0].table.set_id(1);
  cases[0].says = "has id 1";
  cases[1].table.clear_name();
  cases[1].says = "has no name";
  cases[2].table.set_rows(0);
  cases[2].says = "has 0 rows";
  cases[3].table.set_dim(0);
  cases[3].says = "has dim 0";
  cases[4].table.set_dim(kMaxChunkBytes);
  cases[4].says = "one chunk";
  cases[5].table.set_bound(-1);
  cases[5].says = "bound -1";
  cases[6].table.set_bound(std::nan(""));
  cases[6].says = "bound nan";
  // Rows are floats: initial values would be +-inf.
  cases[7].table.set_bound(1e39);
  cases[7].says = "bound 1e+39";
  for (const Case& c : cases) {
    ShardState state(Job(SYNC), 0);
    auto r = Init(state, {c.table}, 1, 1);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.says));
  }
  for (OptimizerSpec::Kind kind :
       {OptimizerSpec::RMSPROP, OptimizerSpec::LAMB, OptimizerSpec::ADAMW}) {
    ShardState state(Job(SYNC, 1, kind), 0);
    auto r = Init(state, {Table(0, 10, 2)}, 1, 1);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(),
                HasSubstr("the sparse tables need an optimizer that steps "
                          "rows"));
    EXPECT_THAT(r.status().message(),
                HasSubstr(OptimizerSpec::Kind_Name(kind)));
  }
  JobSpec momentum = Job(SYNC, 1, OptimizerSpec::SGD);
  momentum.mutable_optimizer()->set_momentum(0.9f);
  ShardState with_momentum(momentum, 0);
  EXPECT_THAT(Init(with_momentum, {Table(0, 10, 2)}, 1, 1).status().message(),
              HasSubstr("momentum"));
  // Without tables the dense rules take what they take.
  EXPECT_TRUE(Init(with_momentum, {}, 1, 1, 3).ok());

  // A retry with the same tables is acknowledged; other tables are refused.
  ShardState state(Job(SYNC), 0);
  const std::vector<SparseTableInfo> tables = {Table(0, 10, 2),
                                               Table(1, 20, 4)};
  ASSERT_TRUE(Init(state, tables, 1, 1).ok());
  auto again = Init(state, tables, 1, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  std::vector<SparseTableInfo> other = tables;
  other[1].set_seed(5);
  EXPECT_EQ(Init(state, other, 1, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  InitHeader h;
  h.set_worker_id("w0");
  h.set_world_size(1);
  h.set_total_replicas(1);
  *h.add_tables() = tables[0];
  auto check = state.CheckInit(h);
  EXPECT_EQ(check.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(check.status().message(), HasSubstr("2 sparse tables"));
}

TEST(ShardRowsTest, StatsCountRowsAndTheirBytes) {
  ShardState state(Job(ASYNC, 1, OptimizerSpec::SGD), 0);
  ASSERT_TRUE(Init(state, {Table(0, 100, 2), Table(1, 100, 3)}, 1, 1, 5).ok());
  const std::vector<RowChunk> rows = {Rows(0, {1, 2, 3}, std::vector<float>(6)),
                                      Rows(1, {3}, std::vector<float>(3)),
                                      Rows(0, {9}, std::vector<float>(2))};
  ASSERT_TRUE(
      Push(state, Header(0, 1, 0, 0.1), rows, std::vector<float>(5)).ok());
  ASSERT_TRUE(PullRows(state, 1, {3, 3, 50}).ok());
  const ShardStats st = state.Stats();
  EXPECT_EQ(st.rows_pushed(), 5);
  EXPECT_EQ(st.rows_held(), 5);
  EXPECT_EQ(st.rows_pulled(), 3);
  // Dense 5 floats; rows: 5 ids and 11 floats.
  EXPECT_EQ(st.bytes_pushed(), 5 * 4 + 5 * 8 + 11 * 4);
  EXPECT_EQ(st.bytes_pulled(), 3 * 8 + 9 * 4);
}

}  // namespace
}  // namespace cohort
