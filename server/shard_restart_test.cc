// The coordinator's side of parameter-server shard restarts, over real
// gRPC: in a job with checkpoints, a shard that misses heartbeats is dead
// (not fatal), a spare waits, a replacement takes the dead index with the
// layout to restore, status shows it, and the job fails when no
// replacement comes, or when the replacement cannot restore.
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using testing::Reply;
using Clock = std::chrono::steady_clock;

constexpr int kHeartbeatMs = 100;

std::unique_ptr<CoordinatorServer> StartPs(int64_t join_timeout_ms,
                                           const std::string& checkpoint_dir,
                                           int shards) {
  ClusterSpec c;
  c.set_min_workers(1);
  c.set_max_workers(1);
  c.set_join_timeout_ms(join_timeout_ms);
  c.set_heartbeat_interval_ms(kHeartbeatMs);
  c.set_heartbeat_misses(3);
  CoordinatorOptions options;
  options.job = testing::TestJob(c);
  options.job.set_mode(PS);
  options.job.mutable_ps()->set_shards(shards);
  options.job.mutable_ps()->set_partition_bytes(1 << 20);
  options.job.mutable_checkpoint()->set_dir(checkpoint_dir);
  options.job.mutable_checkpoint()->set_every_steps(10);
  auto server = CoordinatorServer::Start(options);
  CHECK(server.ok()) << server.status();
  return *std::move(server);
}

RegisterShardRequest Shard(const std::string& id, int port) {
  RegisterShardRequest r;
  r.set_protocol_version(Protocol::CURRENT);
  r.set_shard_id(id);
  r.set_address(absl::StrCat("127.0.0.1:", port));
  r.set_host("host-" + id);
  r.set_pid(port);
  return r;
}

Reply<RegisterShardResponse> Register(Coordinator::Stub& stub,
                                      const RegisterShardRequest& r) {
  grpc::ClientContext ctx;
  Reply<RegisterShardResponse> reply;
  reply.status = stub.RegisterShard(&ctx, r, &reply.response);
  return reply;
}

Reply<ShardHeartbeatResponse> ShardBeatWith(Coordinator::Stub& stub,
                                            const std::string& id, int index,
                                            const ShardStats& stats) {
  grpc::ClientContext ctx;
  ShardHeartbeatRequest r;
  r.set_shard_id(id);
  r.set_shard_index(index);
  *r.mutable_stats() = stats;
  Reply<ShardHeartbeatResponse> reply;
  reply.status = stub.ShardHeartbeat(&ctx, r, &reply.response);
  return reply;
}

grpc::Status ShardBeat(Coordinator::Stub& stub, const std::string& id,
                       int index, const std::string& failure = "") {
  grpc::ClientContext ctx;
  ShardHeartbeatRequest r;
  r.set_shard_id(id);
  r.set_shard_index(index);
  r.set_failure(failure);
  ShardHeartbeatResponse response;
  return stub.ShardHeartbeat(&ctx, r, &response);
}

// Worker "w0"'s heartbeat with `steps` done.
grpc::Status WorkerBeat(Coordinator::Stub& stub, const JoinResponse& joined,
                        int64_t steps) {
  grpc::ClientContext ctx;
  HeartbeatRequest r;
  r.set_generation(joined.generation());
  r.set_worker_id("w0");
  r.set_rank(joined.rank());
  r.mutable_progress()->set_step(steps);
  HeartbeatResponse response;
  return stub.Heartbeat(&ctx, r, &response);
}

// A running job: shards "s0", "s1"... on ports 5000, 5001..., worker "w0",
// a plan of `sizes`.
struct Running {
  std::unique_ptr<CoordinatorServer> server;
  std::unique_ptr<Coordinator::Stub> stub;
  JoinResponse joined;
  PlanPartitionsResponse plan;

  explicit Running(int64_t join_timeout_ms, const std::string& dir = "/ckpt",
                   int shards = 1,
                   // Two partitions of at most 1 MiB.
                   const std::vector<int64_t>& sizes = {1000, 300000}) {
    server = StartPs(join_timeout_ms, dir, shards);
    stub = testing::NewStub(server->address());
    for (int i = 0; i < shards; ++i) {
      const auto reg = Register(*stub, Shard(absl::StrCat("s", i), 5000 + i));
      CHECK(reg.status.ok()) << reg.status.error_message();
      CHECK(!reg.response.restore());
      CHECK(!reg.response.run_id().empty());
    }
    joined = testing::JoinAll(*stub, 1)[0];
    grpc::ClientContext ctx;
    PlanPartitionsRequest r;
    r.set_generation(joined.generation());
    r.set_rank(0);
    for (int64_t n : sizes) r.add_param_sizes(n);
    CHECK(stub->PlanPartitions(&ctx, r, &plan).ok());
  }

  // Keeps the worker (and the shards in `beating`) alive for `d`, or until
  // `done(status)`; returns the last status.
  template <typename Done>
  StatusResponse Wait(Clock::duration d,
                      const std::vector<std::string>& beating,
                      const Done& done) {
    const Clock::time_point end = Clock::now() + d;
    StatusResponse s;
    while (Clock::now() < end) {
      testing::Heartbeat(*stub, joined, "w0");
      for (const std::string& id : beating) ShardBeat(*stub, id, 0);
      s = testing::GetStatus(*stub);
      if (done(s)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    return s;
  }
};

bool Dead(const StatusResponse& s) { return s.shards(0).state() == "dead"; }

TEST(ShardRestart, DeadShardWaitsForAReplacementThatTakesItsIndex) {
  Running job(/*join_timeout_ms=*/10000);
  // A spare started while every shard is alive waits (UNAVAILABLE, which
  // its client retries).
  const auto spare = Register(*job.stub, Shard("s1", 5001));
  EXPECT_EQ(spare.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(spare.status.error_message().find("none is dead"),
            std::string::npos)
      << spare.status.error_message();

  StatusResponse s = job.Wait(std::chrono::seconds(5), {}, Dead);
  ASSERT_TRUE(Dead(s)) << s.ShortDebugString();
  EXPECT_EQ(s.state(), RUNNING) << s.reason();

  const auto reg = Register(*job.stub, Shard("s1", 5001));
  ASSERT_TRUE(reg.status.ok()) << reg.status.error_message();
  const RegisterShardResponse& r = reg.response;
  EXPECT_EQ(r.shard_index(), 0);
  EXPECT_TRUE(r.restore());
  EXPECT_EQ(r.world_size(), 1);
  EXPECT_EQ(r.total_replicas(), 1);
  ASSERT_EQ(r.partitions_size(), job.plan.partitions_size());
  EXPECT_EQ(r.partitions(1).SerializeAsString(),
            job.plan.partitions(1).SerializeAsString());
  // A retry of the registration gets the same answer.
  const auto again = Register(*job.stub, Shard("s1", 5001));
  EXPECT_EQ(again.response.SerializeAsString(), r.SerializeAsString());

  s = testing::GetStatus(*job.stub);
  EXPECT_EQ(s.shards(0).state(), "restoring");
  EXPECT_EQ(s.shards(0).restarts(), 1);
  EXPECT_EQ(s.shards(0).address(), "127.0.0.1:5001");
  // The dead process is fenced; the replacement serves.
  EXPECT_EQ(ShardBeat(*job.stub, "s0", 0).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(ShardBeat(*job.stub, "s1", 0).ok());
  s = job.Wait(std::chrono::milliseconds(600), {"s1"},
               [](const StatusResponse&) { return false; });
  EXPECT_EQ(s.state(), RUNNING) << s.reason();
  EXPECT_EQ(s.shards(0).state(), "serving");
  // A worker joining now would be told the new address.
  EXPECT_EQ(testing::GetStatus(*job.stub).shards(0).address(),
            "127.0.0.1:5001");
}

// SYNC: the dead shard's last heartbeat said min_clock 5, but it applied
// two more steps before it died (the worker has done 7); its checkpoint
// may lack them. The replacement learns that every worker pushed every
// step below 7 at once, and of the worker's later progress with each
// heartbeat: a worker that moved on to an evaluation (which waits for the
// others) never pulls again to tell it.
TEST(ShardRestart, ReplacementLearnsTheWorkersProgress) {
  Running job(/*join_timeout_ms=*/10000);
  ShardStats stats;
  stats.set_min_clock(5);
  ASSERT_TRUE(ShardBeatWith(*job.stub, "s0", 0, stats).status.ok());
  ASSERT_TRUE(WorkerBeat(*job.stub, job.joined, 7).ok());
  bool dead = false;
  for (int i = 0; i < 100 && !dead; ++i) {
    ASSERT_TRUE(WorkerBeat(*job.stub, job.joined, 7).ok());
    dead = Dead(testing::GetStatus(*job.stub));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  ASSERT_TRUE(dead);
  const auto reg = Register(*job.stub, Shard("s1", 5001));
  ASSERT_TRUE(reg.status.ok()) << reg.status.error_message();
  ASSERT_TRUE(reg.response.restore());
  EXPECT_EQ(reg.response.dead_min_clock(), 7);

  ASSERT_TRUE(WorkerBeat(*job.stub, job.joined, 9).ok());
  auto beat = ShardBeatWith(*job.stub, "s1", 0, ShardStats());
  ASSERT_TRUE(beat.status.ok()) << beat.status.error_message();
  EXPECT_EQ(beat.response.workers_clock(), 9);
  // A worker's result counts too: it may have finished between two
  // heartbeats.
  grpc::ClientContext ctx;
  FinishRequest finish;
  finish.set_generation(job.joined.generation());
  finish.set_worker_id("w0");
  finish.set_rank(job.joined.rank());
  finish.set_ok(true);
  finish.mutable_result()->set_steps(12);
  finish.mutable_result()->set_test_accuracy(-1);
  finish.mutable_result()->set_test_loss(-1);
  FinishResponse finished;
  ASSERT_TRUE(job.stub->Finish(&ctx, finish, &finished).ok());
  beat = ShardBeatWith(*job.stub, "s1", 0, ShardStats());
  ASSERT_TRUE(beat.status.ok()) << beat.status.error_message();
  EXPECT_EQ(beat.response.workers_clock(), 12);
}

TEST(ShardRestart, ShardWithoutPartitionsIsReplacedWithoutARestore) {
  // A plan of one partition leaves shard 1 empty: it never held anything.
  Running job(10000, "/ckpt", /*shards=*/2, /*sizes=*/{1000});
  ASSERT_EQ(job.plan.partitions_size(), 1);
  const int empty = 1 - job.plan.partitions(0).shard();
  const std::string alive = absl::StrCat("s", 1 - empty);
  StatusResponse s =
      job.Wait(std::chrono::seconds(5), {alive}, [&](const StatusResponse& s) {
        return s.shards(empty).state() == "dead";
      });
  ASSERT_EQ(s.shards(empty).state(), "dead");
  const auto reg = Register(*job.stub, Shard("s9", 5009));
  ASSERT_TRUE(reg.status.ok()) << reg.status.error_message();
  EXPECT_EQ(reg.response.shard_index(), empty);
  EXPECT_FALSE(reg.response.restore());
}

TEST(ShardRestart, ShardBackBeforeAReplacementServesOn) {
  Running job(10000);
  StatusResponse s = job.Wait(std::chrono::seconds(5), {}, Dead);
  ASSERT_TRUE(Dead(s));
  ASSERT_TRUE(ShardBeat(*job.stub, "s0", 0).ok());
  s = testing::GetStatus(*job.stub);
  EXPECT_EQ(s.shards(0).state(), "serving");
  EXPECT_EQ(s.shards(0).restarts(), 0);
  EXPECT_EQ(s.state(), RUNNING);
}

TEST(ShardRestart, NoReplacementWithinTheJoinTimeoutFailsTheJob) {
  Running job(/*join_timeout_ms=*/500);
  const Clock::time_point start = Clock::now();
  const StatusResponse s =
      job.Wait(std::chrono::seconds(5), {},
               [](const StatusResponse& s) { return s.state() == FAILED; });
  ASSERT_EQ(s.state(), FAILED);
  EXPECT_NE(s.reason().find("shard 0 at 127.0.0.1:5000"), std::string::npos)
      << s.reason();
  EXPECT_NE(s.reason().find("no replacement registered within "
                            "cluster.join_timeout_ms (500 ms)"),
            std::string::npos)
      << s.reason();
  // 3 x 100 ms to declare it dead, 500 ms to wait, and slack.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3);
}

TEST(ShardRestart, ReplacementThatCannotRestoreFailsTheJobWithItsReason) {
  Running job(10000);
  ASSERT_TRUE(Dead(job.Wait(std::chrono::seconds(5), {}, Dead)));
  ASSERT_TRUE(Register(*job.stub, Shard("s1", 5001)).status.ok());
  ASSERT_TRUE(
      ShardBeat(*job.stub, "s1", 0, "no checkpoint in /ckpt/shard-0").ok());
  const StatusResponse s = testing::GetStatus(*job.stub);
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_NE(s.reason().find("no checkpoint in /ckpt/shard-0"),
            std::string::npos)
      << s.reason();
}

TEST(ShardRestart, WithoutCheckpointsASilentShardStillFailsTheJob) {
  Running job(10000, /*dir=*/"");
  const auto extra = Register(*job.stub, Shard("s1", 5001));
  EXPECT_EQ(extra.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  const StatusResponse s =
      job.Wait(std::chrono::seconds(5), {},
               [](const StatusResponse& s) { return s.state() == FAILED; });
  ASSERT_EQ(s.state(), FAILED);
  EXPECT_NE(s.reason().find("missed heartbeats"), std::string::npos)
      << s.reason();
}

}  // namespace
}  // namespace cohort
