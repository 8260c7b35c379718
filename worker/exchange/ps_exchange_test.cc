#include "worker/exchange/ps_exchange.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/fake_ps_service.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kCount = 8;  // dense parameters
constexpr int kDim = 2;

SparseTableInfo Table(int id, int64_t rows) {
  SparseTableInfo t;
  t.set_id(id);
  t.set_name(absl::StrCat("3.", id, ".weight"));
  t.set_rows(rows);
  t.set_dim(kDim);
  return t;
}

// Two local replicas with two sparse tables each, their dense gradients,
// and fake shards the exchange reaches through a PsConnect as the worker
// process builds it.
struct Replicas {
  std::vector<std::unique_ptr<FakePsShard>> shards =
      StartFakeShards(2, {kDim, kDim});
  std::vector<float> params = std::vector<float>(kCount, 1.0f);
  std::vector<std::vector<float>> grads = {std::vector<float>(kCount, 1.0f),
                                           std::vector<float>(kCount, 2.0f)};
  std::vector<std::vector<std::unique_ptr<SparseTable>>> tables;
  std::vector<SparseTableInfo> infos = {Table(0, 100), Table(1, 40)};
  PsLink link;

  Replicas() {
    for (int r = 0; r < 2; ++r) {
      tables.emplace_back();
      for (const SparseTableInfo& t : infos) {
        tables[r].push_back(std::make_unique<SparseTable>(t.rows(), t.dim()));
        tables[r].back()->set_id(t.id());
      }
    }
  }

  PsConnect Connect() {
    return [this](float* p, const std::vector<int64_t>& sizes,
                  const std::vector<SparseTableInfo>& tables)
               -> absl::StatusOr<PsLink*> {
      PsClientOptions o;
      o.shard_addresses = Addresses(shards);
      Partition part;
      part.set_shard(0);
      part.set_count(sizes[0]);
      o.partitions = {part};
      o.tables = tables;
      ASSIGN_OR_RETURN(link.client, PsClient::Create(o));
      RETURN_IF_ERROR(link.client->Init(p, 1, 2));
      RETURN_IF_ERROR(link.client->Pull(0, p));
      return &link;
    };
  }

  std::unique_ptr<PsExchange> Exchange() {
    std::vector<std::vector<SparseTable*>> by_replica(2);
    for (int r = 0; r < 2; ++r) {
      for (auto& t : tables[r]) by_replica[r].push_back(t.get());
    }
    return std::make_unique<PsExchange>(
        std::vector<float*>{grads[0].data(), grads[1].data()}, kCount,
        params.data(), Connect(), std::move(by_replica), infos);
  }

  // Replica r's rows `ids` of table k, with gradients from `g0` up.
  void Touch(int r, int k, std::vector<int64_t> ids, float g0) {
    SparseTable& t = *tables[r][k];
    t.ids = std::move(ids);
    t.grads.clear();
    for (size_t i = 0; i < t.ids.size() * kDim; ++i) {
      t.grads.push_back(g0 + 0.1f * i);
    }
  }

  // Row -> pushed gradient of table k, over every shard's last push.
  std::map<int64_t, std::vector<float>> Pushed(int k) {
    std::map<int64_t, std::vector<float>> out;
    for (const auto& s : shards) {
      const FakeShardRecord r = s->Snapshot();
      if (r.pushes.empty()) continue;
      for (const RowChunk& c : r.pushes.back().rows) {
        if (c.table() != k) continue;
        const float* g = reinterpret_cast<const float*>(c.data().data());
        for (int i = 0; i < c.ids_size(); ++i) {
          out[c.ids(i)].assign(g + i * kDim, g + (i + 1) * kDim);
        }
      }
    }
    return out;
  }
};

ExchangeStep Step(int64_t clock, int active) {
  ExchangeStep s;
  s.clock = clock;
  s.active = active;
  s.lr = 0.1;
  return s;
}

TEST(PsExchangeTest, APushCarriesTheRowsMeanOverTheReplicasTakingPart) {
  Replicas x;
  auto ex = x.Exchange();
  ASSERT_TRUE(ex->Setup({kCount}).ok());
  x.Touch(0, 0, {1, 5, 9}, 1.0f);
  x.Touch(1, 0, {5, 7}, 3.0f);
  x.Touch(0, 1, {}, 0);
  x.Touch(1, 1, {39}, 0.5f);
  ex->BeginStep(Step(3, 2));
  ASSERT_TRUE(ex->Finish().ok());
  const std::vector<float>& a = x.tables[0][0]->grads;
  const std::vector<float>& b = x.tables[1][0]->grads;
  std::map<int64_t, std::vector<float>> want = {
      {1, {a[0] * 0.5f, a[1] * 0.5f}},
      {5, {(a[2] + b[0]) * 0.5f, (a[3] + b[1]) * 0.5f}},
      {7, {b[2] * 0.5f, b[3] * 0.5f}},
      {9, {a[4] * 0.5f, a[5] * 0.5f}}};
  EXPECT_EQ(x.Pushed(0), want);
  const std::vector<float>& c = x.tables[1][1]->grads;
  want = {{39, {c[0] * 0.5f, c[1] * 0.5f}}};
  EXPECT_EQ(x.Pushed(1), want);
  for (const auto& s : x.shards) {
    const FakeShardRecord r = s->Snapshot();
    ASSERT_EQ(r.pushes.size(), 1u);
    EXPECT_EQ(r.pushes[0].header.clock(), 3);
    EXPECT_EQ(r.pushes[0].header.weight(), 2);
    ASSERT_EQ(r.inits.size(), 1u);
    EXPECT_EQ(r.inits[0].tables_size(), 2);
    EXPECT_EQ(r.inits[0].tables(1).name(), "3.1.weight");
  }
}

TEST(PsExchangeTest, OnlyTheReplicasTakingPartPushRows) {
  Replicas x;
  auto ex = x.Exchange();
  ASSERT_TRUE(ex->Setup({kCount}).ok());
  x.Touch(0, 0, {2}, 1.5f);
  x.Touch(1, 0, {2, 3}, 4.0f);  // left over from an earlier step
  x.Touch(0, 1, {}, 0);
  x.Touch(1, 1, {1}, 4.0f);
  ex->BeginStep(Step(0, 1));
  ASSERT_TRUE(ex->Finish().ok());
  const std::map<int64_t, std::vector<float>> want = {{2, {1.5f, 1.6f}}};
  EXPECT_EQ(x.Pushed(0), want);
  EXPECT_TRUE(x.Pushed(1).empty());
}

TEST(PsExchangeTest, FetchPullsRowsAtTheStepsClockOrTheLastPulls) {
  Replicas x;
  auto ex = x.Exchange();
  ASSERT_TRUE(ex->Setup({kCount}).ok());
  const std::vector<int64_t> ids = {0, 3, 4, 99};
  std::vector<float> values(ids.size() * kDim);
  const RowRequest q{0, ids, values.data()};
  auto clocks = [&x] {
    std::vector<int64_t> out;
    for (const auto& s : x.shards) {
      for (const PullRowsRequest& r : s->Snapshot().row_pulls) {
        out.push_back(r.clock());
      }
    }
    return out;
  };
  ASSERT_TRUE(ex->Fetch({q}).ok());
  EXPECT_THAT(clocks(), ::testing::Each(0));
  for (auto& replica : x.tables) {
    for (auto& t : replica) t->ids.clear(), t->grads.clear();
  }
  ex->BeginStep(Step(6, 2));
  ASSERT_TRUE(ex->Fetch({q}).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(values[i * kDim + 1], FakeRowValue(0, ids[i], 1)) << ids[i];
  }
  ASSERT_TRUE(ex->Finish().ok());
  ASSERT_TRUE(ex->Pull(7).ok());
  ASSERT_TRUE(ex->Fetch({q}).ok());  // e.g. evaluation after the step
  std::vector<int64_t> seen = clocks();
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 6, 7}));
  EXPECT_GT(ex->TakeStats().bytes, 0);
}

TEST(PsExchangeTest, FetchErrorsNameTheClock) {
  Replicas x;
  auto ex = x.Exchange();
  ASSERT_TRUE(ex->Setup({kCount}).ok());
  const std::vector<int64_t> ids = {100};
  std::vector<float> values(kDim);
  absl::Status s = ex->Fetch({RowRequest{0, ids, values.data()}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("parameter server, clock 0: "));
  EXPECT_THAT(s.message(), HasSubstr("has no row 100"));
}

}  // namespace
}  // namespace cohort
