// Shard checkpoints and restore: the file round trip (parameters, optimizer
// state, bookkeeping), the refusals (another layout, run, shard or job),
// the writer thread, and the recovery rules of a restored shard in SYNC
// and SSP (shard_state.h) with the workers ahead of it.
#include "server/ps/shard_checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two partitions of shard 0: 4 and 3 elements.
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

JobSpec Job(Consistency c, float momentum, const std::string& dir = "") {
  JobSpec job;
  job.mutable_optimizer()->set_kind(OptimizerSpec::SGD);
  job.mutable_optimizer()->set_momentum(momentum);
  job.mutable_ps()->set_consistency(c);
  if (c == SSP) job.mutable_ps()->set_staleness(1);
  job.mutable_ps()->set_rpc_timeout_ms(5000);
  job.mutable_checkpoint()->set_dir(dir);
  return job;
}

// A fresh directory under the test's temp dir.
std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(root != nullptr ? root : "/tmp", "/", name, "-", getpid());
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::vector<std::vector<float>> Split(const std::vector<float>& flat) {
  return {{flat.begin(), flat.begin() + 4}, {flat.begin() + 4, flat.end()}};
}

void InitState(ShardState& state, const std::vector<float>& flat,
               int world_size, int total_replicas) {
  InitHeader h;
  h.set_worker_id("w0");
  for (const Partition& p : Layout()) *h.add_partitions() = p;
  h.set_world_size(world_size);
  h.set_total_replicas(total_replicas);
  auto done = state.Init(h, Split(flat));
  ASSERT_TRUE(done.ok()) << done.status();
}

PushHeader Header(int rank, uint64_t seq, int64_t clock,
                  int64_t first_chunk = 0) {
  PushHeader h;
  h.set_worker_id(absl::StrCat("w", rank));
  h.set_rank(rank);
  h.set_seq(seq);
  h.set_clock(clock);
  h.set_lr(0.5);
  h.set_weight(1);
  h.set_first_chunk(first_chunk);
  return h;
}

absl::StatusOr<PushResponse> Push(ShardState& state, const PushHeader& h,
                                  float g) {
  absl::StatusOr<std::vector<Partition>> layout = state.CheckPush(h);
  if (!layout.ok()) return layout.status();
  return state.ApplyPush(h, Split(std::vector<float>(7, g)));
}

// SSP and ASYNC: chunk `chunk` (one per push), round = chunk / 2 (two
// replicas in all).
absl::StatusOr<PushResponse> PushChunk(ShardState& state, int rank,
                                       uint64_t seq, int64_t chunk, float g) {
  return Push(state, Header(rank, seq, chunk / 2, chunk), g);
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

ShardRestoreCheck Expect(int world_size = 2) {
  ShardRestoreCheck e;
  e.shard_index = 0;
  e.run_id = "run-1";
  e.partitions = Layout();
  e.world_size = world_size;
  e.total_replicas = world_size;
  return e;
}

// Writes state's current capture to `dir` and loads it back, checked.
absl::StatusOr<ShardState::Capture> WriteAndLoad(ShardState& state,
                                                 const JobSpec& job) {
  absl::StatusOr<ShardState::Capture> c = state.CaptureNow();
  if (!c.ok()) return c.status();
  const std::string dir = ShardCheckpointDir(job.checkpoint().dir(), 0);
  absl::Status w =
      WriteCheckpoint(dir, EncodeShardCheckpoint(*c, job, "run-1"));
  if (!w.ok()) return w;
  absl::StatusOr<LoadedShardCheckpoint> loaded =
      LoadShardCheckpoint(job, Expect());
  if (!loaded.ok()) return loaded.status();
  return std::move(loaded->capture);
}

TEST(ShardCheckpointTest, RoundTripRestoresParametersOptimizerAndSeqs) {
  const JobSpec job = Job(SYNC, 0.9f, TempDir("roundtrip"));
  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  for (int64_t step = 0; step < 2; ++step) {
    ASSERT_TRUE(Push(a, Header(0, step + 1, step), 1.0f + step).ok());
    ASSERT_TRUE(Push(a, Header(1, step + 1, step), 3.0f).ok());
  }
  auto c = WriteAndLoad(a, job);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->version, 2);
  EXPECT_THAT(c->clocks, ElementsAre(2, 2));
  EXPECT_EQ(c->next_sync_clock, 2);
  EXPECT_EQ(c->last_seq.at("w1"), 2u);
  ASSERT_EQ(c->optimizer_state.size(), 2u);
  ASSERT_EQ(c->optimizer_state[0].size(), 1u);  // the momentum buffer

  ShardState b(job, 0);
  ASSERT_TRUE(b.Restore(*c).ok());
  // The same next step on both: equal parameters only if the momentum
  // buffers were restored too.
  for (ShardState* s : {&a, &b}) {
    ASSERT_TRUE(Push(*s, Header(0, 3, 2), -2.0f).ok());
    ASSERT_TRUE(Push(*s, Header(1, 3, 2), 0.5f).ok());
  }
  auto pa = PullNow(a, 0, 3);
  auto pb = PullNow(b, 0, 3);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(Flat(*pa), Flat(*pb));
  EXPECT_EQ(pb->version, 3);
  // A push the checkpoint holds is a duplicate.
  auto dup = Push(b, Header(0, 2, 1), 9.0f);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate());
  const ShardStats st = b.Stats();
  EXPECT_TRUE(st.restored());
  EXPECT_EQ(st.restored_version(), 2);
  EXPECT_EQ(st.checkpoint_version(), 2);
  EXPECT_EQ(b.Restore(*c).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardCheckpointTest, RestoreRefusesAnotherLayoutRunShardOrJob) {
  const JobSpec job = Job(ASYNC, 0.0f, TempDir("refuse"));
  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  ASSERT_TRUE(PushChunk(a, 0, 1, 0, 1.0f).ok());
  absl::StatusOr<ShardState::Capture> c = a.CaptureNow();
  ASSERT_TRUE(c.ok());
  const Checkpoint ckpt = EncodeShardCheckpoint(*c, job, "run-1");

  ShardRestoreCheck other = Expect();
  other.partitions[1].set_count(4);
  auto s = DecodeShardCheckpoint(ckpt, "f", job, other);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("its partitions [0@0+4 1@4+3]"));

  other = Expect();
  other.run_id = "run-2";
  s = DecodeShardCheckpoint(ckpt, "f", job, other);
  EXPECT_THAT(s.status().message(), HasSubstr("another run of the job"));

  other = Expect();
  other.shard_index = 1;
  s = DecodeShardCheckpoint(ckpt, "f", job, other);
  EXPECT_THAT(s.status().message(), HasSubstr("holds shard 0, not shard 1"));

  s = DecodeShardCheckpoint(ckpt, "f", job, Expect(/*world_size=*/3));
  EXPECT_THAT(s.status().message(), HasSubstr("2 workers"));

  JobSpec changed = job;
  changed.mutable_optimizer()->set_lr(0.7f);
  s = DecodeShardCheckpoint(ckpt, "f", changed, Expect());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(),
              HasSubstr("another model, data, optimizer"));

  Checkpoint torn = ckpt;
  torn.tensors.pop_back();
  s = DecodeShardCheckpoint(torn, "f", job, Expect());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);

  // What decodes but contradicts the state's own job is refused too.
  s = DecodeShardCheckpoint(ckpt, "f", job, Expect());
  ASSERT_TRUE(s.ok()) << s.status();
  ShardState ssp(Job(SSP, 0.0f), 0);
  EXPECT_THAT(ssp.Restore(*s).message(), HasSubstr("written in ASYNC"));
  ShardState momentum(Job(ASYNC, 0.9f), 0);
  EXPECT_THAT(momentum.Restore(*s).message(), HasSubstr("optimizer tensors"));
}

TEST(ShardCheckpointTest, MissingCheckpointsAndAnEarlierRunsFiles) {
  const JobSpec job = Job(SYNC, 0.0f, TempDir("missing"));
  auto loaded = LoadShardCheckpoint(job, Expect());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);

  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  const std::string dir = ShardCheckpointDir(job.checkpoint().dir(), 0);
  auto c = a.CaptureNow();
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(
      WriteCheckpoint(dir, EncodeShardCheckpoint(*c, job, "run-0")).ok());
  std::ofstream(dir + "/ckpt-000000000009.cohort.tmp-1") << "torn";
  EXPECT_THAT(LoadShardCheckpoint(job, Expect()).status().message(),
              HasSubstr("another run"));
  auto removed = RemoveShardCheckpoints(dir);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(LoadShardCheckpoint(job, Expect()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*RemoveShardCheckpoints(dir + "/absent"), 0);
}

TEST(ShardCheckpointTest, PullsWaitLongerWhenShardsRestart) {
  JobSpec job = Job(SYNC, 0.0f);
  job.mutable_cluster()->set_heartbeat_interval_ms(100);
  job.mutable_cluster()->set_heartbeat_misses(3);
  job.mutable_cluster()->set_join_timeout_ms(1000);
  EXPECT_EQ(ShardState(job, 0).pull_timeout(), absl::Seconds(5));
  job.mutable_checkpoint()->set_dir("/ckpt");
  // A peer may be stalled by another shard's restart: declared dead after
  // 0.4 s, replaced within 1 s, restored within 1 s more.
  EXPECT_EQ(ShardState(job, 0).pull_timeout(), absl::Milliseconds(7400));
}

TEST(ShardCheckpointTest, WriterTakesACaptureAtInitAndEveryNUpdates) {
  const JobSpec job = Job(ASYNC, 0.9f, TempDir("writer"));
  const std::string dir = ShardCheckpointDir(job.checkpoint().dir(), 0);
  ShardState state(job, 0);
  state.EnableCheckpoints(/*every_steps=*/2, absl::ZeroDuration());
  auto writer =
      std::make_unique<ShardCheckpointer>(&state, dir, 3, job, "run-1", 0);
  auto written = [&](int64_t version) {
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (state.Stats().checkpoint_version() < version &&
           absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return state.Stats().checkpoint_version();
  };
  InitState(state, kInit, 2, 2);
  EXPECT_EQ(written(0), 0);
  ASSERT_TRUE(PushChunk(state, 0, 1, 0, 1.0f).ok());
  EXPECT_EQ(state.Stats().checkpoint_version(), 0) << "due after 2 updates";
  ASSERT_TRUE(PushChunk(state, 1, 1, 1, 2.0f).ok());
  EXPECT_EQ(written(2), 2);
  ASSERT_TRUE(PushChunk(state, 0, 2, 2, 1.0f).ok());
  ASSERT_TRUE(PushChunk(state, 1, 2, 3, 2.0f).ok());
  EXPECT_EQ(written(4), 4);
  state.Shutdown();
  writer.reset();
  for (int v : {0, 2, 4}) {
    EXPECT_TRUE(ReadCheckpointFile(dir + "/" + CheckpointFileName(v)).ok())
        << v;
  }
  auto loaded = LoadShardCheckpoint(job, Expect());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->capture.watermark, 4);
}

// SYNC, 2 ranks; the shard is checkpointed after step 0 and dies after
// step 2, whose push from rank 0 was acknowledged and from rank 1 not.
TEST(ShardRecoveryTest, SyncCatchesUpWithTheWorkersAndAppliesLostPushes) {
  const JobSpec job = Job(SYNC, 0.0f);
  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  ASSERT_TRUE(Push(a, Header(0, 1, 0), 1.0f).ok());
  ASSERT_TRUE(Push(a, Header(1, 1, 0), 3.0f).ok());
  auto c = a.CaptureNow();  // version 1
  ASSERT_TRUE(c.ok());
  std::vector<float> at_checkpoint;
  for (const auto& p : c->params) {
    at_checkpoint.insert(at_checkpoint.end(), p->begin(), p->end());
  }

  ShardState b(job, 0);
  ASSERT_TRUE(b.Restore(*c).ok());
  // Rank 0 goes on to its pull of step 3 and waits for rank 1 ...
  absl::StatusOr<ShardState::Snapshot> pulled;
  std::thread rank0([&] { pulled = PullNow(b, 0, 3, absl::Seconds(5)); });
  absl::SleepFor(absl::Milliseconds(50));
  // ... whose retried push of step 2 is not in the checkpoint: applied.
  auto retried = Push(b, Header(1, 3, 2), 4.0f);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_FALSE(retried->duplicate());
  rank0.join();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  // Step 1 was lost entirely (skipped); step 2 has rank 1's gradient only,
  // averaged over the weight that arrived: p - 0.5 * 4.
  EXPECT_EQ(pulled->version, 2);
  std::vector<float> want = at_checkpoint;
  for (float& x : want) x -= 0.5f * 4.0f;
  EXPECT_EQ(Flat(*pulled), want);
  ASSERT_TRUE(PullNow(b, 1, 3).ok());
  // A retry of a push the checkpoint has is a duplicate; training goes on.
  auto dup = Push(b, Header(0, 1, 0), 1.0f);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate());
  ASSERT_TRUE(Push(b, Header(0, 4, 3), 1.0f).ok());
  ASSERT_TRUE(Push(b, Header(1, 4, 3), 1.0f).ok());
  auto next = PullNow(b, 0, 4);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->version, 3);
  EXPECT_EQ(b.Stats().min_clock(), 4);
}

TEST(ShardRecoveryTest, SyncSkipsStepsWhosePushesWereAllLost) {
  const JobSpec job = Job(SYNC, 0.0f);
  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  auto c = a.CaptureNow();  // version 0
  ASSERT_TRUE(c.ok());
  ShardState b(job, 0);
  // Workers that reach the replacement before its restore retry.
  b.ExpectRestore();
  EXPECT_EQ(Push(b, Header(0, 9, 4), 1.0f).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(PullNow(b, 0, 5).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(b.Restore(*c).ok());
  // Both workers had their step-4 pushes acknowledged: they pull step 5.
  std::thread rank1(
      [&] { ASSERT_TRUE(PullNow(b, 1, 5, absl::Seconds(5)).ok()); });
  auto p = PullNow(b, 0, 5, absl::Seconds(5));
  rank1.join();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->version, 0);
  EXPECT_EQ(Flat(*p), kInit);
  // Without a restore, the same pull waits for the pushes.
  EXPECT_EQ(PullNow(a, 0, 5).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// The ps_restart_test race: the dead shard had applied steps 0-4 (its last
// heartbeat said min_clock 5), the checkpoint has none of them, rank 0 got
// its step-5 parameters and went on to an evaluation that waits for rank 1,
// and rank 1's pull of step 5 reaches the replacement. Knowing the dead
// shard's min_clock, the replacement answers it at once; rank 0's push of
// step 4, retried because its acknowledgement was lost, is a duplicate.
TEST(ShardRecoveryTest, SyncSkipsStepsBelowTheDeadShardsMinClock) {
  const JobSpec job = Job(SYNC, 0.0f);
  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  auto c = a.CaptureNow();  // version 0
  ASSERT_TRUE(c.ok());
  ShardState b(job, 0);
  ASSERT_TRUE(b.Restore(*c).ok());
  // Without the dead shard's min_clock, rank 1's pull waits for rank 0.
  EXPECT_EQ(PullNow(b, 1, 5).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  b.RaiseSyncClocks(5);
  auto p = PullNow(b, 1, 5);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Flat(*p), kInit);
  auto late = Push(b, Header(0, 5, 4), 1.0f);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->duplicate());
  // Training goes on from step 5.
  ASSERT_TRUE(Push(b, Header(0, 6, 5), 1.0f).ok());
  ASSERT_TRUE(Push(b, Header(1, 6, 5), 1.0f).ok());
  auto next = PullNow(b, 0, 6);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->version, 1);
  // Not restored: nothing to raise.
  a.RaiseSyncClocks(5);
  EXPECT_EQ(PullNow(a, 0, 5).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// SSP (staleness 1), 2 ranks of one replica: chunk k is round k / 2. The
// checkpoint has chunks 0 and 1; chunks 2-5 were acknowledged after it and
// lost; rank 0's push of chunk 6 was in flight.
TEST(ShardRecoveryTest, SspForgivesLostChunksAndStillAppliesLateOnes) {
  const JobSpec job = Job(SSP, 0.0f);
  ShardState a(job, 0);
  InitState(a, kInit, 2, 2);
  ASSERT_TRUE(PushChunk(a, 0, 1, 0, 1.0f).ok());
  ASSERT_TRUE(PushChunk(a, 1, 1, 1, 1.0f).ok());
  auto c = a.CaptureNow();
  ASSERT_TRUE(c.ok());
  ShardState b(job, 0);
  ASSERT_TRUE(b.Restore(*c).ok());

  // Rank 1 claimed chunk 7: its pull of round 3 would wait for chunk 3
  // (4 with staleness 1), which nobody will push again. It does not wait.
  auto p = PullNow(b, 1, 3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(b.Stats().min_clock(), 3);  // chunks below 6 forgiven
  // Rank 0 retries chunk 6 (a new seq for the restored shard): applied.
  auto retried = PushChunk(b, 0, 4, 6, 1.0f);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_FALSE(retried->duplicate());
  ASSERT_TRUE(PushChunk(b, 1, 4, 7, 1.0f).ok());
  // Rank 0's second push since the restore ends the recovery.
  ASSERT_TRUE(PushChunk(b, 0, 5, 8, 1.0f).ok());
  EXPECT_EQ(b.Stats().version(), 5);

  // A forgiven chunk that still comes is applied once.
  ASSERT_TRUE(PushChunk(b, 1, 5, 3, 1.0f).ok());
  EXPECT_EQ(b.Stats().version(), 6);
  auto twice = PushChunk(b, 1, 6, 3, 1.0f);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  // A chunk applied before the checkpoint is refused, as always.
  auto old = PushChunk(b, 0, 6, 0, 1.0f);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kInvalidArgument);
  // Recovery is over: SSP waits for chunks really missing again (9 and up).
  EXPECT_EQ(PullNow(b, 0, 6).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // The forgiven chunks survive another checkpoint and restore.
  auto again = b.CaptureNow();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->forgiven.size(), 2u);  // [2, 3) and [4, 6)
  const Checkpoint ckpt = EncodeShardCheckpoint(*again, job, "run-1");
  auto decoded = DecodeShardCheckpoint(ckpt, "f", job, Expect());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ShardState d(job, 0);
  ASSERT_TRUE(d.Restore(*decoded).ok());
  EXPECT_TRUE(PushChunk(d, 1, 7, 4, 1.0f).ok());
  EXPECT_FALSE(PushChunk(d, 1, 8, 3, 1.0f).ok());
}

}  // namespace
}  // namespace cohort
