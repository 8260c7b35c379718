// A shard's sparse tables in checkpoints: the file round trip (48-bit row
// ids, values, rule state and step counts, exactly), the refusal of a
// corrupt or inconsistent one naming the field, and the recovery of a
// restored shard's rows.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ps/shard_checkpoint.h"
#include "server/ps/shard_rows_test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using namespace rows_test;  // NOLINT: the shared test helpers

constexpr int64_t kBig = int64_t{1} << 40;

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(root != nullptr ? root : "/tmp", "/", name, "-", getpid());
  mkdir(dir.c_str(), 0755);
  return dir;
}

// Shard 0 of 2: a dense partition of 3 and two tables, one of 2^40 rows.
std::vector<SparseTableInfo> Tables() {
  return {Table(0, kBig, 3), Table(1, 50, 2)};
}

// Rows of table 0 owned by shard 0, above 2^24 (a float's exact integers)
// and beyond.
std::vector<int64_t> BigRows(int n) {
  std::vector<int64_t> ids;
  for (int64_t r = kBig - 1; static_cast<int>(ids.size()) < n; r -= 999983) {
    if (SparseRowOwner(0, r, 2) == 0) ids.push_back(r);
  }
  return ids;
}

// Step `step` of ranks 0 and 1 (seq step + 1) with rows of both tables.
void PushStep(ShardState& state, int64_t step) {
  const std::vector<int64_t> big = BigRows(3), small = OwnedRows(1, 0, 2, 2);
  for (int rank = 0; rank < 2; ++rank) {
    const float g = 0.5f + rank + step;
    const std::vector<RowChunk> rows = {
        Rows(0, {big[rank], big[2]}, std::vector<float>(6, g)),
        Rows(1, {small[(rank + step) % 2]}, std::vector<float>(2, -g))};
    auto r = Push(state, Header(rank, step + 1, step, 0.1), rows,
                  std::vector<float>(3, g));
    ASSERT_TRUE(r.ok()) << r.status();
  }
}

void ExpectSameRows(const ShardState::Capture& a,
                    const ShardState::Capture& b) {
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t t = 0; t < a.rows.size(); ++t) {
    EXPECT_EQ(a.rows[t].ids, b.rows[t].ids) << "table " << t;
    EXPECT_EQ(a.rows[t].values, b.rows[t].values) << "table " << t;
    EXPECT_EQ(a.rows[t].state, b.rows[t].state) << "table " << t;
    EXPECT_EQ(a.rows[t].steps, b.rows[t].steps) << "table " << t;
  }
}

TEST(ShardRowsCheckpointTest, FileRoundTripAndRestoreAreExact) {
  JobSpec job = Job(SYNC, 2);
  job.mutable_checkpoint()->set_dir(TempDir("rows-roundtrip"));
  ShardState a(job, 0);
  ASSERT_TRUE(Init(a, Tables(), 2, 2, 3, {1, 2, 3}).ok());
  PushStep(a, 0);
  PushStep(a, 1);
  auto c = a.CaptureNow();
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tables.size(), 2u);
  EXPECT_EQ(c->rows[0].ids.size(), 3u);
  EXPECT_GT(c->rows[0].ids[0], int64_t{1} << 24);
  const std::string dir = ShardCheckpointDir(job.checkpoint().dir(), 0);
  ASSERT_TRUE(WriteCheckpoint(dir, EncodeShardCheckpoint(*c, job, "r")).ok());
  ShardRestoreCheck expect;
  auto loaded = LoadShardCheckpoint(job, expect);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ShardState::Capture& d = loaded->capture;
  ASSERT_EQ(d.tables.size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_TRUE(SameTable(d.tables[t], c->tables[t])) << t;
  }
  ExpectSameRows(*c, d);

  ShardState b(job, 0);
  ASSERT_TRUE(b.Restore(d).ok());
  EXPECT_EQ(b.Stats().rows_held(), a.Stats().rows_held());
  // The same next step on both: equal rows only if the state and the step
  // counts (Adagrad's lr_decay) came back too.
  PushStep(a, 2);
  PushStep(b, 2);
  auto ca = a.CaptureNow(), cb = b.CaptureNow();
  ASSERT_TRUE(ca.ok() && cb.ok());
  ExpectSameRows(*ca, *cb);
  auto pa = PullRows(a, 0, BigRows(3), 3), pb = PullRows(b, 0, BigRows(3), 3);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(*pa, *pb);
  // A retried Init with the checkpoint's tables is a retry.
  auto again = Init(b, Tables(), 2, 2, 3, {1, 2, 3});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again);
}

TEST(ShardRowsCheckpointTest, CorruptRowTensorsAreRefusedNamingThem) {
  const JobSpec job = Job(ASYNC, 2);
  ShardState a(job, 0);
  ASSERT_TRUE(Init(a, Tables(), 1, 1).ok());
  ASSERT_TRUE(Push(a, Header(0, 1, 0, 0.1),
                   {Rows(0, BigRows(2), std::vector<float>(6, 1.0f))})
                  .ok());
  auto c = a.CaptureNow();
  ASSERT_TRUE(c.ok());
  const Checkpoint good = EncodeShardCheckpoint(*c, job, "r");
  auto tensor = [](Checkpoint& k, const std::string& name) {
    for (CheckpointTensor& t : k.tensors) {
      if (t.name == name) return &t;
    }
    ADD_FAILURE() << "no tensor " << name;
    static CheckpointTensor none;
    return &none;
  };
  struct Case {
    std::function<void(Checkpoint&)> spoil;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[&](Checkpoint& k) { tensor(k, "t0/ids_lo")->values[1] = 0.5f; },
       absl::StatusCode::kDataLoss, "t0/ids_hi/lo entry 1 has part 0.5"},
      {[&](Checkpoint& k) { tensor(k, "t0/ids_hi")->values[0] = 1 << 24; },
       absl::StatusCode::kDataLoss, "not an integer in [0, 2^24)"},
      {[&](Checkpoint& k) { tensor(k, "t0/ids_hi")->values.pop_back(); },
       absl::StatusCode::kDataLoss, "1 high and 2 low parts"},
      {[&](Checkpoint& k) { tensor(k, "t1/steps")->values.push_back(0); },
       absl::StatusCode::kDataLoss, "t1/steps has 3 values"},
      {[&](Checkpoint& k) {
         auto& v = k.tensors;
         v.erase(std::find_if(v.begin(), v.end(), [](const auto& t) {
           return t.name == "t0/state";
         }));
       },
       absl::StatusCode::kDataLoss, "has no tensor t0/state"},
  };
  for (const Case& k : cases) {
    Checkpoint bad = good;
    k.spoil(bad);
    auto d = DecodeShardCheckpoint(bad, "f", job, ShardRestoreCheck());
    EXPECT_EQ(d.status().code(), k.code) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr(k.says));
  }
  // What decodes but contradicts itself or the shard: Restore refuses it,
  // naming the table and the field, and stays uninitialized.
  auto d = DecodeShardCheckpoint(good, "f", job, ShardRestoreCheck());
  ASSERT_TRUE(d.ok()) << d.status();
  struct Bad {
    std::function<void(ShardState::Capture&)> spoil;
    std::string says;
  };
  const int64_t theirs = OwnedRows(1, 1, 2, 1)[0];
  const std::vector<Bad> bad = {
      {[](ShardState::Capture& k) { k.rows[0].values.pop_back(); },
       "table 0 ('2.0.weight'): 2 row ids with 5 values"},
      {[](ShardState::Capture& k) { k.rows[0].ids[1] = k.rows[0].ids[0]; },
       "is stored twice"},
      {[&](ShardState::Capture& k) {
         k.rows[1].ids.push_back(theirs);
         k.rows[1].values.resize(2);
         k.rows[1].state.resize(2);
       },
       absl::StrCat("row id ", theirs, " belongs to shard 1")},
      {[](ShardState::Capture& k) { k.rows.pop_back(); },
       "stored rows for 1 sparse tables, it has 2"},
      {[](ShardState::Capture& k) { k.tables[1].set_dim(0); }, "has dim 0"},
  };
  for (const Bad& k : bad) {
    ShardState::Capture spoilt = *d;
    k.spoil(spoilt);
    ShardState b(job, 0);
    const absl::Status s = b.Restore(spoilt);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(k.says));
    EXPECT_THAT(s.message(), HasSubstr("shard checkpoint"));
    EXPECT_TRUE(b.Restore(*d).ok()) << "a refused restore changed the shard";
  }
}

// SYNC, 2 ranks; the shard is checkpointed after step 0 and dies after
// applying step 1. The replacement applies step 1's retried pushes once
// and acknowledges older ones as duplicates: its rows end equal to the
// dead shard's.
TEST(ShardRowsCheckpointTest, RecoveryReappliesLostRowsOnce) {
  const JobSpec job = Job(SYNC, 2);
  ShardState dead(job, 0);
  ASSERT_TRUE(Init(dead, Tables(), 2, 2, 3, {1, 2, 3}).ok());
  PushStep(dead, 0);
  auto c = dead.CaptureNow();
  ASSERT_TRUE(c.ok());
  PushStep(dead, 1);
  ShardState b(job, 0);
  ASSERT_TRUE(b.Restore(*c).ok());
  PushStep(b, 1);  // the workers retry what the dead shard lost
  auto dup = Push(b, Header(0, 1, 0, 0.1),
                  {Rows(0, BigRows(1), std::vector<float>(3, 7.0f))},
                  std::vector<float>(3, 7.0f));
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_TRUE(dup->duplicate());
  auto want = dead.CaptureNow(), got = b.CaptureNow();
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->version, 2);
  ExpectSameRows(*want, *got);
  EXPECT_EQ(b.Stats().rows_pushed(), 6);  // step 1's, once
}

}  // namespace
}  // namespace cohort
