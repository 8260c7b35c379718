#include "server/ps/shard_state.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/time/clock.h"
#include "client/ps_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two partitions of this shard (index 0): 4 and 3 elements.
std::vector<Partition> Layout() {
  std::vector<Partition> parts(2);
  parts[0].set_id(0);
  parts[0].set_offset(0);
  parts[0].set_count(4);
  parts[1].set_id(1);
  parts[1].set_offset(4);
  parts[1].set_count(3);
  return parts;
}

JobSpec Job(Consistency c, int staleness = 0) {
  JobSpec job;
  job.mutable_optimizer()->set_kind(OptimizerSpec::SGD);
  job.mutable_optimizer()->set_momentum(0.9f);
  job.mutable_ps()->set_consistency(c);
  job.mutable_ps()->set_staleness(staleness);
  job.mutable_ps()->set_rpc_timeout_ms(5000);
  return job;
}

TensorChunk Chunk(int partition, int64_t offset, std::vector<float> v) {
  TensorChunk c;
  c.set_partition(partition);
  c.set_offset(offset);
  c.set_data(
      std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return c;
}

// Whole-partition chunks from a flat 7-element buffer.
std::vector<TensorChunk> Chunks(const std::vector<float>& flat) {
  return {Chunk(0, 0, {flat.begin(), flat.begin() + 4}),
          Chunk(1, 0, {flat.begin() + 4, flat.end()})};
}

// As the server does: header check, staging, then apply.
absl::StatusOr<PushResponse> TryPush(ShardState& state, const PushHeader& h,
                                     const std::vector<TensorChunk>& chunks) {
  absl::StatusOr<std::vector<Partition>> layout = state.CheckPush(h);
  if (!layout.ok()) return layout.status();
  ChunkAssembler assembler(*layout, "push");
  for (const TensorChunk& c : chunks) {
    absl::Status s = assembler.Add(c);
    if (!s.ok()) return s;
  }
  auto grads = assembler.Finish();
  if (!grads.ok()) return grads.status();
  return state.ApplyPush(h, *std::move(grads));
}

// SSP and ASYNC pushes name their data chunks; by default chunk `clock`
// (one chunk per round, as with one replica in all).
PushHeader Header(int rank, uint64_t seq, int64_t clock, double lr = 0.1,
                  int weight = 1, int64_t based_on = 0,
                  int64_t first_chunk = -1) {
  PushHeader h;
  h.set_worker_id(absl::StrCat("w", rank));
  h.set_rank(rank);
  h.set_seq(seq);
  h.set_clock(clock);
  h.set_lr(lr);
  h.set_weight(weight);
  h.set_based_on_version(based_on);
  h.set_first_chunk(first_chunk >= 0 ? first_chunk : clock);
  return h;
}

void InitState(ShardState& state, const std::vector<float>& flat,
               int world_size, int total_replicas) {
  InitHeader h;
  h.set_worker_id("w0");
  for (const Partition& p : Layout()) *h.add_partitions() = p;
  h.set_world_size(world_size);
  h.set_total_replicas(total_replicas);
  ChunkAssembler a(Layout(), "init");
  for (const TensorChunk& c : Chunks(flat)) ASSERT_TRUE(a.Add(c).ok());
  auto values = a.Finish();
  ASSERT_TRUE(values.ok()) << values.status();
  auto done = state.Init(h, *std::move(values));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(*done);
}

std::vector<float> Flat(const ShardState::Snapshot& s) {
  std::vector<float> out;
  for (const auto& v : s.values) out.insert(out.end(), v->begin(), v->end());
  return out;
}

absl::StatusOr<ShardState::Snapshot> PullNow(
    ShardState& state, int rank, int64_t clock,
    absl::Duration wait = absl::Milliseconds(50)) {
  return state.WaitForPull(rank, clock, absl::Now() + wait);
}

const std::vector<float> kInit = {1, 2, 3, 4, 5, 6, 7};

TEST(ShardStateTest, SyncAveragesWeightedPushesAndAppliesOnce) {
  ShardState state(Job(SYNC), 0);
  InitState(state, kInit, /*world_size=*/2, /*total_replicas=*/3);
  const std::vector<float> g0 = {3, 0, 3, 6, -3, 9, 0};
  const std::vector<float> g1 = {0, 3, 3, -3, 3, 0, 3};
  ASSERT_TRUE(TryPush(state, Header(0, 1, 0, 0.5, 2), Chunks(g0)).ok());
  EXPECT_EQ(state.Stats().version(), 0);  // waits for rank 1
  auto blocked = PullNow(state, 0, 1);
  ASSERT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(blocked.status().message(), HasSubstr("slowest rank(s) 1"));
  auto r = TryPush(state, Header(1, 1, 0, 0.5, 1), Chunks(g1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version(), 1);
  // Step 2: the momentum buffer carries over.
  ASSERT_TRUE(TryPush(state, Header(0, 2, 1, 0.25, 2), Chunks(g0)).ok());
  ASSERT_TRUE(TryPush(state, Header(1, 2, 1, 0.25, 1), Chunks(g1)).ok());
  auto snap = PullNow(state, 1, 2);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->version, 2);
  EXPECT_EQ(snap->min_clock, 2);
  const std::vector<float> got = Flat(*snap);
  for (int i = 0; i < 7; ++i) {
    const double g = (2.0 * g0[i] + g1[i]) / 3.0;
    double b = g, p = kInit[i] - 0.5 * b;
    b = 0.9 * b + g;
    p -= 0.25 * b;
    EXPECT_NEAR(got[i], p, 1e-5) << "element " << i;
  }
  const ShardStats stats = state.Stats();
  EXPECT_EQ(stats.pushes(), 4);
  EXPECT_EQ(stats.staleness_histogram(0), 4);
}

// 16-bit pushes (compression FP16, BF16) arrive as the floats they round
// to; odd byte counts and unknown encodings are refused.
TEST(ShardStateTest, HalfChunksDecodeToTheirFloats) {
  const std::vector<uint16_t> fp16 = {0x3c00, 0xc000, 0x3800, 0x7bff};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x0000};
  ChunkAssembler a(Layout(), "push");
  TensorChunk c;
  c.set_partition(0);
  c.set_encoding(TensorChunk::FLOAT16);
  c.set_data(std::string(reinterpret_cast<const char*>(fp16.data()), 8));
  ASSERT_TRUE(a.Add(c).ok());
  c.set_partition(1);
  c.set_encoding(TensorChunk::BFLOAT16);
  c.set_data(std::string(reinterpret_cast<const char*>(bf16.data()), 6));
  ASSERT_TRUE(a.Add(c).ok());
  auto values = a.Finish();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT((*values)[0], ElementsAre(1.0f, -2.0f, 0.5f, 65504.0f));
  EXPECT_THAT((*values)[1], ElementsAre(1.0f, -3.0f, 0.0f));

  ChunkAssembler b(Layout(), "push");
  c.set_data(std::string(3, '\0'));
  EXPECT_THAT(std::string(b.Add(c).message()),
              HasSubstr("3 bytes, not a multiple of 2"));
  c.set_encoding(static_cast<TensorChunk::Encoding>(7));
  c.set_data(std::string(4, '\0'));
  EXPECT_THAT(std::string(b.Add(c).message()), HasSubstr("unknown encoding 7"));
}

TEST(ShardStateTest, SspBlocksPullUntilOldRoundsAreApplied) {
  // Two replicas in all, so round r is chunks 2r and 2r + 1. Rank 1 holds
  // chunk 1 (round 0) and is slow; rank 0 takes chunks 0, 2 and 3.
  ShardState state(Job(SSP, /*staleness=*/1), 0);
  InitState(state, kInit, 2, 2);
  const std::vector<float> g(7, 1.0f);
  auto push = [&](int rank, uint64_t seq, int64_t chunk) {
    return TryPush(state, Header(rank, seq, chunk / 2, 0.1, 1, 0, chunk),
                   Chunks(g));
  };
  ASSERT_TRUE(push(0, 1, 0).ok());
  ASSERT_TRUE(PullNow(state, 0, 1).ok());  // round 1: needs rounds < 0
  ASSERT_TRUE(push(0, 2, 2).ok());
  ASSERT_TRUE(push(0, 3, 3).ok());
  std::atomic<bool> done{false};
  absl::StatusOr<ShardState::Snapshot> pulled;
  std::thread t([&] {
    // Round 2 with staleness 1 needs all of round 0, and chunk 1 is missing.
    pulled = state.WaitForPull(0, 2, absl::Now() + absl::Seconds(10));
    done = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(done);
  auto blocked = PullNow(state, 0, 2);
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(blocked.status().message(), HasSubstr("chunk 1 (round 0)"));
  ASSERT_TRUE(push(1, 1, 1).ok());
  t.join();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->min_clock, 2);  // chunks 0..3 applied: rounds 0 and 1
  EXPECT_EQ(pulled->version, 4);
  EXPECT_GE(state.Stats().wait_s(), 0.15);
}

TEST(ShardStateTest, ChunkPushedTwiceIsRefusedAndChangesNothing) {
  ShardState state(Job(ASYNC), 0);
  InitState(state, kInit, 2, 4);
  const std::vector<float> g(7, 1.0f);
  // Chunks [0, 2) and [4, 6) applied; [2, 4) missing.
  ASSERT_TRUE(TryPush(state, Header(0, 1, 0, 0.1, 2, 0, 0), Chunks(g)).ok());
  ASSERT_TRUE(TryPush(state, Header(1, 1, 1, 0.1, 2, 0, 4), Chunks(g)).ok());
  struct Case {
    int64_t first;
    int weight;
  };
  for (const Case& c : {Case{1, 1}, Case{3, 2}, Case{5, 1}, Case{2, 4}}) {
    auto r =
        TryPush(state, Header(0, 10 + c.first, 0, 0.1, c.weight, 0, c.first),
                Chunks(g));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << "chunks from " << c.first << ": " << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("already applied"));
  }
  auto negative = TryPush(state, Header(0, 20, 0, 0.1, 1, 0, 0), Chunks(g));
  EXPECT_FALSE(negative.ok());  // chunk 0 again
  PushHeader h = Header(0, 21, 0);
  h.set_first_chunk(-1);
  EXPECT_THAT(TryPush(state, h, Chunks(g)).status().message(),
              HasSubstr("first_chunk -1"));
  EXPECT_EQ(state.Stats().version(), 2);
  EXPECT_EQ(state.Stats().min_clock(), 0);  // chunk 2 missing
  ASSERT_TRUE(TryPush(state, Header(1, 2, 0, 0.1, 2, 0, 2), Chunks(g)).ok());
  EXPECT_EQ(state.Stats().min_clock(), 1);  // chunks 0..5: round 0 of 4
}

TEST(ShardStateTest, AsyncNeverBlocksAndCountsStaleness) {
  ShardState state(Job(ASYNC), 0);
  InitState(state, kInit, 2, 2);
  auto snap = state.WaitForPull(1, 1000, absl::Now());
  ASSERT_TRUE(snap.ok()) << snap.status();
  const std::vector<float> g(7, 1.0f);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    // All computed on version 0: staleness 0, 1/2 = 0, 2/2 = 1 clocks.
    ASSERT_TRUE(
        TryPush(state, Header(0, seq, seq - 1, 0.1, 1, 0), Chunks(g)).ok());
  }
  const ShardStats stats = state.Stats();
  EXPECT_EQ(stats.version(), 3);
  EXPECT_THAT(stats.staleness_histogram(),
              ElementsAre(2, 1, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(stats.min_clock(), 1);  // chunks 0..2 of two-chunk rounds
}

TEST(ShardStateTest, DuplicateSeqIsAcknowledgedNotApplied) {
  ShardState state(Job(ASYNC), 0);
  InitState(state, kInit, 1, 1);
  const std::vector<float> g(7, 1.0f);
  auto first = TryPush(state, Header(0, 1, 0), Chunks(g));
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->duplicate());
  auto again = TryPush(state, Header(0, 1, 0), Chunks(g));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate());
  EXPECT_EQ(again->version(), 1);
  const ShardStats stats = state.Stats();
  EXPECT_EQ(stats.version(), 1);
  EXPECT_EQ(stats.pushes(), 1);
  EXPECT_EQ(stats.duplicate_pushes(), 1);
  auto snap = PullNow(state, 0, 0);
  ASSERT_TRUE(snap.ok());
  EXPECT_FLOAT_EQ(Flat(*snap)[0], 1.0f - 0.1f);
}

TEST(ShardStateTest, PushBeforeInitIsFailedPrecondition) {
  ShardState state(Job(ASYNC), 0);
  auto r = TryPush(state, Header(0, 1, 0), Chunks(kInit));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  auto pull = PullNow(state, 0, 0);
  EXPECT_EQ(pull.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(pull.status().message(), HasSubstr("no Init"));
}

TEST(ShardStateTest, MalformedPushesChangeNothing) {
  ShardState state(Job(SYNC), 0);
  InitState(state, kInit, 2, 2);
  const std::vector<float> g(7, 1.0f);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    const char* name;
    PushHeader header;
    std::vector<TensorChunk> chunks;
    absl::StatusCode code;
    const char* mentions;
  };
  std::vector<TensorChunk> odd = Chunks(g);
  odd[1].mutable_data()->resize(5);
  std::vector<TensorChunk> outside = Chunks(g);
  outside[1].set_offset(1);
  std::vector<TensorChunk> twice = Chunks(g);
  twice.push_back(Chunk(0, 2, {1, 1}));
  std::vector<TensorChunk> missing = Chunks(g);
  missing[0] = Chunk(0, 0, {1, 1, 1});
  std::vector<TensorChunk> unknown = Chunks(g);
  unknown.push_back(Chunk(9, 0, {1}));
  std::vector<TensorChunk> huge = Chunks(g);
  huge[0].mutable_data()->resize(kMaxChunkBytes + 4);
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const std::vector<Case> cases = {
      {"rank -1", Header(-1, 1, 0), Chunks(g), kInvalid, "rank"},
      {"rank 2", Header(2, 1, 0), Chunks(g), kInvalid, "rank"},
      {"seq 0", Header(0, 0, 0), Chunks(g), kInvalid, "seq"},
      {"clock -1", Header(0, 1, -1), Chunks(g), kInvalid, "clock"},
      {"lr nan", Header(0, 1, 0, nan), Chunks(g), kInvalid, "lr"},
      {"lr < 0", Header(0, 1, 0, -1), Chunks(g), kInvalid, "lr"},
      {"weight 0", Header(0, 1, 0, 0.1, 0), Chunks(g), kInvalid, "weight"},
      {"weight 3", Header(0, 1, 0, 0.1, 3), Chunks(g), kInvalid, "weight"},
      {"unknown", Header(0, 1, 0), unknown, kInvalid, "partition 9"},
      {"odd bytes", Header(0, 1, 0), odd, kInvalid, "multiple of 4"},
      {"outside", Header(0, 1, 0), outside, kInvalid, "outside"},
      {"twice", Header(0, 1, 0), twice, kInvalid, "covered twice"},
      {"missing", Header(0, 1, 0), missing, kInvalid, "not covered"},
      {"huge", Header(0, 1, 0), huge, absl::StatusCode::kResourceExhausted,
       "limit"},
  };
  for (const Case& c : cases) {
    auto r = TryPush(state, c.header, c.chunks);
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.mentions)) << c.name;
  }
  // Nothing was accumulated: one full step from both ranks gives exactly
  // one SGD step of the mean gradient.
  const ShardStats stats = state.Stats();
  EXPECT_EQ(stats.version(), 0);
  EXPECT_EQ(stats.pushes(), 0);
  EXPECT_EQ(stats.min_clock(), 0);
  ASSERT_TRUE(TryPush(state, Header(0, 1, 0, 0.5), Chunks(g)).ok());
  ASSERT_TRUE(TryPush(state, Header(1, 1, 0, 0.5), Chunks(g)).ok());
  auto snap = PullNow(state, 0, 1);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->version, 1);
  const std::vector<float> got = Flat(*snap);
  for (int i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(got[i], kInit[i] - 0.5f);
}

// Wire fields at the edges of their types are refused before any
// arithmetic or allocation uses them (each of these once overflowed or
// allocated without bound, found by fuzz/shard_fuzzer.cc).
TEST(ShardStateTest, ExtremeFieldsAreRefusedNotComputedWith) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  ShardState state(Job(ASYNC), 0);
  InitState(state, kInit, 2, 2);
  const std::vector<float> g(7, 1.0f);
  struct Case {
    const char* name;
    PushHeader header;
    std::vector<TensorChunk> chunks;
  };
  std::vector<TensorChunk> far = Chunks(g);
  far[0].set_offset(kMax - 1);
  PushHeader old_version = Header(0, 1, 0);
  old_version.set_based_on_version(-kMax);
  const std::vector<Case> cases = {
      {"chunk offset", Header(0, 1, 0), far},
      {"based_on_version", old_version, Chunks(g)},
      {"first_chunk", Header(0, 1, 0, 0.1, 1, 0, kMax - 1), Chunks(g)},
      {"clock", Header(0, 1, kMax), Chunks(g)},
  };
  for (const Case& c : cases) {
    auto r = TryPush(state, c.header, c.chunks);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << r.status();
  }
  EXPECT_EQ(PullNow(state, 0, kMax).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.Stats().version(), 0);

  ShardState fresh(Job(ASYNC), 0);
  InitHeader big;
  big.set_world_size(2);
  big.set_total_replicas(2);
  Partition* p = big.add_partitions();
  p->set_id(0);
  p->set_count(int64_t{1} << 40);  // 4 TiB, refused before allocating
  EXPECT_FALSE(fresh.CheckInit(big).ok());
  InitHeader many = big;
  many.mutable_partitions(0)->set_count(10);
  many.set_world_size(std::numeric_limits<int32_t>::max());
  many.set_total_replicas(std::numeric_limits<int32_t>::max());
  EXPECT_EQ(fresh.CheckInit(many).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardStateTest, SecondInitSameLayoutIsAcknowledgedDifferentRefused) {
  ShardState state(Job(ASYNC), 0);
  InitState(state, kInit, 2, 2);
  InitHeader h;
  for (const Partition& p : Layout()) *h.add_partitions() = p;
  h.set_world_size(2);
  h.set_total_replicas(2);
  auto again = state.CheckInit(h);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  auto same = state.Init(h, {std::vector<float>(4), std::vector<float>(3)});
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(*same);
  auto snap = PullNow(state, 0, 0);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(Flat(*snap), kInit);  // the retry's values were ignored
  h.set_world_size(3);
  EXPECT_EQ(state.CheckInit(h).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStateTest, ShutdownWakesWaitingPulls) {
  ShardState state(Job(SYNC), 0);
  InitState(state, kInit, 2, 2);
  absl::Status pulled;
  std::thread t([&] {
    pulled = state.WaitForPull(0, 5, absl::Now() + absl::Seconds(10)).status();
  });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  state.Shutdown();
  t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(pulled.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(pulled.message(), HasSubstr("shard shutting down"));
}

// optimizer.no_decay_bias_and_norm in a shard: the partition's tensors
// come from the job's layer specs (a linear layer's weight, 12 elements
// padded to 16, then its bias, 3 padded to 16), and only the weight decays.
TEST(ShardStateTest, PartitionLayoutExcludesBiasesFromDecay) {
  JobSpec job;
  job.mutable_model()->add_layers()->mutable_linear()->set_out_features(3);
  job.mutable_data()->set_kind(DatasetSpec::SYNTHETIC);
  job.mutable_data()->mutable_synthetic()->add_shape(4);
  OptimizerSpec* o = job.mutable_optimizer();
  o->set_kind(OptimizerSpec::SGD);
  o->set_weight_decay(0.5f);
  Partition whole;
  whole.set_offset(0);
  whole.set_count(32);
  EXPECT_TRUE(ShardState::PartitionLayout(job, whole).segments.empty());
  o->set_no_decay_bias_and_norm(true);
  const RuleLayout layout = ShardState::PartitionLayout(job, whole);
  ASSERT_EQ(layout.segments.size(), 2u);
  EXPECT_TRUE(layout.segments[0].decay);
  EXPECT_FALSE(layout.segments[1].decay);
  EXPECT_EQ(layout.segments[1].begin, 16);

  // Zero gradients: decay alone moves the weight, and the bias stays.
  std::unique_ptr<UpdateRule<float>> rule =
      ShardState::NewOptimizer(*o, 32, layout);
  std::vector<float> p(32, 1.0f);
  const std::vector<float> g(32, 0.0f);
  rule->Step(absl::MakeSpan(p), g, 0.5);
  EXPECT_EQ(p[0], 0.75f);
  EXPECT_EQ(p[16], 1.0f);

  // A partition holding only the bias, at its offset in the flat buffer.
  Partition bias;
  bias.set_offset(16);
  bias.set_count(16);
  const RuleLayout tail = ShardState::PartitionLayout(job, bias);
  ASSERT_EQ(tail.segments.size(), 1u);
  EXPECT_EQ(tail.segments[0].begin, 0);
  EXPECT_FALSE(tail.segments[0].decay);
}

}  // namespace
}  // namespace cohort
