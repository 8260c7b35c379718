#include "client/ps_client.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/fake_ps_service.h"
#include "client/ps_limits.h"
#include "common/sparse_rows.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

SparseTableInfo Table(int id, int64_t rows, int dim) {
  SparseTableInfo t;
  t.set_id(id);
  t.set_name(absl::StrCat(id, ".weight"));
  t.set_rows(rows);
  t.set_dim(dim);
  t.set_seed(7 + id);
  t.set_bound(0.25);
  return t;
}

Partition Part(int id, int shard, int64_t offset, int64_t count) {
  Partition p;
  p.set_id(id);
  p.set_shard(shard);
  p.set_offset(offset);
  p.set_count(count);
  return p;
}

// A client of `shards` with the dense model [0, 16) as one partition on
// shard 0, and `tables`.
std::unique_ptr<PsClient> Client(
    const std::vector<std::unique_ptr<FakePsShard>>& shards,
    const std::vector<SparseTableInfo>& tables) {
  PsClientOptions o;
  o.shard_addresses = Addresses(shards);
  o.partitions = {Part(0, 0, 0, 16)};
  o.worker_id = "w0";
  o.rpc_timeout = absl::Seconds(20);
  o.tables = tables;
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

// Fills `values` through PullRows and checks every element.
void ExpectPulled(PsClient& c, int table, int dim,
                  const std::vector<int64_t>& ids) {
  std::vector<float> values(ids.size() * dim, -1);
  PsRowRequest q{table, ids, values.data()};
  ASSERT_TRUE(c.PullRows(3, {q}).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int d = 0; d < dim; ++d) {
      ASSERT_EQ(values[i * dim + d], FakeRowValue(table, ids[i], d))
          << "table " << table << " row " << ids[i] << " element " << d;
    }
  }
}

TEST(PsClientRowsTest, PullRowsAsksEachOwnerForItsRowsAndKeepsTheOrder) {
  auto shards = StartFakeShards(3, {4, 2});
  auto c = Client(shards, {Table(0, 1000, 4), Table(1, 50, 2)});
  std::vector<int64_t> ids0, ids1;
  for (int64_t r = 0; r < 1000; r += 3) ids0.push_back(r);
  for (int64_t r = 1; r < 50; r += 2) ids1.push_back(r);
  std::vector<float> v0(ids0.size() * 4), v1(ids1.size() * 2);
  const std::vector<PsRowRequest> q = {{0, ids0, v0.data()},
                                       {1, ids1, v1.data()}};
  ASSERT_TRUE(c->PullRows(5, q).ok());
  for (size_t i = 0; i < ids0.size(); ++i) {
    EXPECT_EQ(v0[i * 4 + 3], FakeRowValue(0, ids0[i], 3)) << ids0[i];
  }
  for (size_t i = 0; i < ids1.size(); ++i) {
    EXPECT_EQ(v1[i * 2 + 1], FakeRowValue(1, ids1[i], 1)) << ids1[i];
  }
  // Every shard got its own rows (the fake refuses others'), all of them,
  // in one call with a chunk per table, at the clock asked.
  size_t asked = 0;
  for (int s = 0; s < 3; ++s) {
    const FakeShardRecord r = shards[s]->Snapshot();
    ASSERT_EQ(r.row_pulls.size(), 1u) << "shard " << s;
    const PullRowsRequest& req = r.row_pulls[0];
    EXPECT_EQ(req.clock(), 5);
    EXPECT_EQ(req.worker_id(), "w0");
    ASSERT_EQ(req.tables_size(), 2);
    EXPECT_EQ(req.tables(0).table(), 0);
    EXPECT_EQ(req.tables(1).table(), 1);
    for (const RowChunk& t : req.tables()) {
      EXPECT_TRUE(std::is_sorted(t.ids().begin(), t.ids().end()));
      asked += t.ids_size();
    }
  }
  EXPECT_EQ(asked, ids0.size() + ids1.size());
  const PsClient::Stats st = c->TakeStats();
  EXPECT_EQ(st.rows_pulled, static_cast<int64_t>(asked));
  EXPECT_EQ(st.bytes_pulled, static_cast<int64_t>(v0.size() + v1.size()) * 4);
}

TEST(PsClientRowsTest, AnswersWithOrWithoutIdsInAnyChunkSizeAreReassembled) {
  auto shards = StartFakeShards(2, {3});
  auto c = Client(shards, {Table(0, 500, 3)});
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < 500; r += 2) ids.push_back(r);
  for (const auto& s : shards) s->SetAnswerChunks(1, /*with_ids=*/false);
  ExpectPulled(*c, 0, 3, ids);
  for (const auto& s : shards) s->SetAnswerChunks(1000, /*with_ids=*/true);
  ExpectPulled(*c, 0, 3, ids);
}

TEST(PsClientRowsTest, WithTablesEveryShardTakesPartInInitPushAndPull) {
  auto shards = StartFakeShards(3, {2});
  auto c = Client(shards, {Table(0, 100, 2)});
  std::vector<float> params(16, 1.5f), grads(16, 0.25f);
  ASSERT_TRUE(c->Init(params.data(), 1, 2).ok());
  PsPush push;
  push.clock = 4;
  c->BeginPush(grads.data(), push);
  PsRows rows;
  rows.table = 0;
  for (int64_t r = 0; r < 100; r += 5) {
    rows.ids.push_back(r);
    rows.grads.push_back(r);
    rows.grads.push_back(-r);
  }
  ASSERT_TRUE(c->SetPushRows({rows}).ok());
  ASSERT_TRUE(c->FinishPush().ok());
  ASSERT_TRUE(c->Pull(5, params.data()).ok());
  std::set<int64_t> pushed;
  for (int s = 0; s < 3; ++s) {
    const FakeShardRecord r = shards[s]->Snapshot();
    ASSERT_EQ(r.inits.size(), 1u) << "shard " << s;
    ASSERT_EQ(r.inits[0].tables_size(), 1);
    EXPECT_EQ(r.inits[0].tables(0).name(), "0.weight");
    EXPECT_EQ(r.inits[0].tables(0).seed(), 7u);
    EXPECT_EQ(r.inits[0].partitions_size(), s == 0 ? 1 : 0);
    ASSERT_EQ(r.pushes.size(), 1u) << "shard " << s;
    const FakePush& p = r.pushes[0];
    EXPECT_EQ(p.header.seq(), 1u);
    EXPECT_EQ(p.header.clock(), 4);
    EXPECT_EQ(p.chunks.size(), s == 0 ? 1u : 0u);
    for (const RowChunk& chunk : p.rows) {
      ASSERT_EQ(chunk.data().size(), chunk.ids_size() * 8u);
      const float* g = reinterpret_cast<const float*>(chunk.data().data());
      for (int i = 0; i < chunk.ids_size(); ++i) {
        const int64_t id = chunk.ids(i);
        EXPECT_EQ(SparseRowOwner(0, id, 3), s) << id;
        EXPECT_EQ(g[2 * i], id);
        EXPECT_EQ(g[2 * i + 1], -id);
        EXPECT_TRUE(pushed.insert(id).second) << "row " << id << " twice";
      }
    }
    ASSERT_EQ(r.pulls.size(), 1u) << "shard " << s;
    EXPECT_EQ(r.pulls[0].clock(), 5);
  }
  EXPECT_EQ(pushed, std::set<int64_t>(rows.ids.begin(), rows.ids.end()));
  EXPECT_EQ(params[3], 1.5f);  // back from shard 0
  EXPECT_EQ(c->TakeStats().rows_pushed, 20);
}

// Compression FP16 and BF16: pushed gradients travel in 16 bits (FP16
// saturating).
TEST(PsClientPushTest, HalfEncodingsHalveThePush) {
  for (auto encoding : {TensorChunk::FLOAT16, TensorChunk::BFLOAT16}) {
    auto shards = StartFakeShards(1, {});
    PsClientOptions o;
    o.shard_addresses = Addresses(shards);
    o.partitions = {Part(0, 0, 0, 16)};
    o.worker_id = "w0";
    o.push_encoding = encoding;
    auto c = PsClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<float> params(16, 1.5f), grads(16, 0.375f);
    grads[3] = 1e6f;
    ASSERT_TRUE((*c)->Init(params.data(), 1, 1).ok());
    ASSERT_TRUE((*c)->Push(grads.data(), PsPush()).ok());
    const FakeShardRecord r = shards[0]->Snapshot();
    ASSERT_EQ(r.pushes.size(), 1u);
    ASSERT_EQ(r.pushes[0].chunks.size(), 1u);
    const TensorChunk& chunk = r.pushes[0].chunks[0];
    EXPECT_EQ(chunk.encoding(), encoding);
    ASSERT_EQ(chunk.data().size(), 32u);
    std::vector<uint16_t> words(16);
    std::memcpy(words.data(), chunk.data().data(), 32);
    // 0.375 is exact in both; 1e6 saturates in FP16, rounds in BF16.
    EXPECT_EQ(words[0], encoding == TensorChunk::FLOAT16 ? 0x3600 : 0x3ec0);
    EXPECT_EQ(words[3], encoding == TensorChunk::FLOAT16 ? 0x7bff : 0x4974);
  }
}

TEST(PsClientRowsTest, WithoutTablesAShardWithoutPartitionsIsLeftAlone) {
  auto shards = StartFakeShards(2, {});
  auto c = Client(shards, {});
  std::vector<float> params(16, 1.0f), grads(16, 0.5f);
  ASSERT_TRUE(c->Init(params.data(), 1, 1).ok());
  ASSERT_TRUE(c->Push(grads.data(), PsPush()).ok());
  ASSERT_TRUE(c->Pull(1, params.data()).ok());
  const FakeShardRecord r0 = shards[0]->Snapshot();
  const FakeShardRecord r1 = shards[1]->Snapshot();
  EXPECT_EQ(r0.inits.size() + r0.pushes.size() + r0.pulls.size(), 3u);
  EXPECT_TRUE(r0.pushes[0].rows.empty());
  EXPECT_EQ(r1.inits.size() + r1.pushes.size() + r1.pulls.size(), 0u);
}

TEST(PsClientRowsTest, APushWithoutRowsStillReachesEveryShard) {
  auto shards = StartFakeShards(2, {2});
  auto c = Client(shards, {Table(0, 10, 2)});
  std::vector<float> grads(16, 0.5f);
  ASSERT_TRUE(c->Push(grads.data(), PsPush()).ok());
  for (const auto& s : shards) {
    const FakeShardRecord r = s->Snapshot();
    ASSERT_EQ(r.pushes.size(), 1u);
    EXPECT_TRUE(r.pushes[0].rows.empty());
  }
}

TEST(PsClientRowsTest, LargeCallsAreSplitUnderTheMessageLimit) {
  // 2^20 rows of dim 1 with ids of 3 and 4 bytes: over 3 MB of ids in
  // one piece, which the fake (like the shard) would refuse.
  constexpr int64_t kRows = int64_t{1} << 22;
  auto shards = StartFakeShards(1, {1});
  auto c = Client(shards, {Table(0, kRows, 1)});
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < kRows; r += 4) ids.push_back(r);
  shards[0]->SetAnswerChunks(kRows, /*with_ids=*/true);
  ExpectPulled(*c, 0, 1, ids);
  std::vector<float> grads(16, 0.5f);
  c->BeginPush(grads.data(), PsPush());
  PsRows rows;
  rows.ids = ids;
  rows.grads.assign(ids.size(), 0.125f);
  ASSERT_TRUE(c->SetPushRows({rows}).ok());
  ASSERT_TRUE(c->FinishPush().ok());
  const FakeShardRecord r = shards[0]->Snapshot();
  EXPECT_GE(r.row_pulls.size(), 3u);
  ASSERT_EQ(r.pushes.size(), 1u);
  EXPECT_GE(r.pushes[0].rows.size(), 3u);
  size_t pushed = 0;
  for (const RowChunk& chunk : r.pushes[0].rows) {
    EXPECT_LE(static_cast<int64_t>(chunk.data().size()), kMaxChunkBytes);
    pushed += chunk.ids_size();
  }
  EXPECT_EQ(pushed, ids.size());
  EXPECT_LE(r.largest_message, static_cast<size_t>(kMaxMessageBytes));
  EXPECT_GT(r.largest_message, static_cast<size_t>(kMaxChunkBytes / 2));
}

TEST(PsClientRowsTest, UnavailableIsRetried) {
  auto shards = StartFakeShards(1, {2});
  auto c = Client(shards, {Table(0, 10, 2)});
  shards[0]->FailRowPulls(2);
  ExpectPulled(*c, 0, 2, {1, 4, 9});
  EXPECT_EQ(shards[0]->Snapshot().row_pulls.size(), 3u);
}

TEST(PsClientRowsTest, OtherErrorsFailAtOnceNamingTheShard) {
  auto shards = StartFakeShards(2, {2});
  auto c = Client(shards, {Table(0, 64, 2)});
  shards[1]->RefuseRowPulls(grpc::StatusCode::FAILED_PRECONDITION);
  std::vector<int64_t> ids(64);
  for (int64_t r = 0; r < 64; ++r) ids[r] = r;
  std::vector<float> values(128);
  absl::Status s = c->PullRows(0, {{0, ids, values.data()}});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              StartsWith(absl::StrCat("pull rows from shard 1 at ",
                                      shards[1]->address(), ": ")));
  EXPECT_EQ(shards[1]->Snapshot().row_pulls.size(), 1u);
}

TEST(PsClientRowsTest, AMissingRowIsDataLoss) {
  auto shards = StartFakeShards(1, {2});
  auto c = Client(shards, {Table(0, 10, 2)});
  shards[0]->DropLastRow();
  const std::vector<int64_t> ids = {2, 3, 5};
  std::vector<float> values(6);
  absl::Status s = c->PullRows(0, {{0, ids, values.data()}});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("got 2 rows, expected 3"));
}

TEST(PsClientRowsTest, RowsOutsideTheirTableAreRefusedNamingThem) {
  auto shards = StartFakeShards(1, {2});
  auto c = Client(shards, {Table(0, 10, 2)});
  const std::vector<int64_t> ids = {2, 10};
  std::vector<float> values(4);
  absl::Status s = c->PullRows(0, {{0, ids, values.data()}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 0 (0.weight) has no row 10"));
  s = c->PullRows(0, {{1, ids, values.data()}});
  EXPECT_THAT(s.message(), HasSubstr("there is no sparse table 1"));
  std::vector<float> grads(16);
  c->BeginPush(grads.data(), PsPush());
  PsRows rows;
  rows.ids = {-1};
  rows.grads = {0, 0};
  s = c->SetPushRows({rows});
  EXPECT_THAT(s.message(), HasSubstr("has no row -1"));
  ASSERT_TRUE(c->FinishPush().ok());
  EXPECT_TRUE(shards[0]->Snapshot().pushes[0].rows.empty());
}

TEST(PsClientRowsTest, PullRowsRunsFromManyThreadsWhileAPushWaits) {
  auto shards = StartFakeShards(2, {4});
  auto c = Client(shards, {Table(0, 4096, 4)});
  std::vector<float> grads(16, 0.5f);
  // Nothing is final: shard 0's thread waits for backward, shard 1's for
  // the rows. Pulls of rows must not wait for them.
  c->BeginPush(grads.data(), PsPush());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      std::vector<int64_t> ids;
      for (int64_t r = t; r < 4096; r += 7) ids.push_back(r);
      ExpectPulled(*c, 0, 4, ids);
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(c->FinishPush().ok());
  int64_t expected = 0;
  for (int t = 0; t < 4; ++t) expected += (4096 - t + 6) / 7;
  EXPECT_EQ(c->TakeStats().rows_pulled, expected);
}

TEST(PsClientRowsTest, CreateRefusesTablesOutOfOrder) {
  auto shards = StartFakeShards(1, {2});
  PsClientOptions o;
  o.shard_addresses = Addresses(shards);
  o.tables = {Table(1, 10, 2)};
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Create(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("has id 1"));
  o.tables = {Table(0, 10, 0)};
  EXPECT_FALSE(PsClient::Create(o).ok());
}

}  // namespace
}  // namespace cohort
