// The coordinator's parameter-server duties over real gRPC: shard
// registration gating the rendezvous, the partition plan, status, and a
// silent shard failing the job.
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using testing::Join;
using testing::MakeJoin;
using testing::Reply;
using Clock = std::chrono::steady_clock;

std::unique_ptr<CoordinatorServer> StartPs(int workers, int shards,
                                           int heartbeat_ms = 1000) {
  ClusterSpec c;
  c.set_min_workers(workers);
  c.set_max_workers(workers);
  c.set_join_timeout_ms(20000);
  c.set_heartbeat_interval_ms(heartbeat_ms);
  c.set_heartbeat_misses(3);
  CoordinatorOptions options;
  options.job = testing::TestJob(c);
  options.job.set_mode(PS);
  options.job.mutable_ps()->set_shards(shards);
  options.job.mutable_ps()->set_partition_bytes(1 << 20);
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

Reply<PlanPartitionsResponse> Plan(Coordinator::Stub& stub,
                                   const JoinResponse& joined,
                                   const std::vector<int64_t>& sizes) {
  grpc::ClientContext ctx;
  PlanPartitionsRequest r;
  r.set_generation(joined.generation());
  r.set_rank(joined.rank());
  for (int64_t n : sizes) r.add_param_sizes(n);
  Reply<PlanPartitionsResponse> reply;
  reply.status = stub.PlanPartitions(&ctx, r, &reply.response);
  return reply;
}

grpc::Status ShardBeat(Coordinator::Stub& stub, const std::string& id,
                       int index) {
  grpc::ClientContext ctx;
  ShardHeartbeatRequest r;
  r.set_shard_id(id);
  r.set_shard_index(index);
  ShardHeartbeatResponse response;
  return stub.ShardHeartbeat(&ctx, r, &response);
}

TEST(PsCoordination, RoundWaitsForEveryShardAndHandsOutTheirAddresses) {
  auto server = StartPs(/*workers=*/1, /*shards=*/2);
  auto stub = testing::NewStub(server->address());
  Reply<JoinResponse> joined;
  std::thread worker([&] { joined = Join(*stub, MakeJoin("w0")); });
  ASSERT_TRUE(Register(*stub, Shard("s0", 5000)).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(testing::GetStatus(*stub).state(), FORMING)
      << "the round completed with a shard missing";
  const Reply<RegisterShardResponse> second =
      Register(*stub, Shard("s1", 5001));
  worker.join();
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.response.shard_index(), 1);
  EXPECT_EQ(second.response.num_shards(), 2);
  EXPECT_EQ(second.response.job().mode(), PS);
  ASSERT_TRUE(joined.status.ok()) << joined.status.error_message();
  ASSERT_EQ(joined.response.shard_addresses_size(), 2);
  EXPECT_EQ(joined.response.shard_addresses(0), "127.0.0.1:5000");
  EXPECT_EQ(joined.response.shard_addresses(1), "127.0.0.1:5001");
}

TEST(PsCoordination, RefusesExtraShardsBadAddressesAndAllReduceJobs) {
  auto server = StartPs(1, 1);
  auto stub = testing::NewStub(server->address());
  ASSERT_TRUE(Register(*stub, Shard("s0", 5000)).status.ok());
  // A retry gets the same index.
  const auto retry = Register(*stub, Shard("s0", 5000));
  ASSERT_TRUE(retry.status.ok());
  EXPECT_EQ(retry.response.shard_index(), 0);
  const auto extra = Register(*stub, Shard("s1", 5001));
  EXPECT_EQ(extra.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(extra.status.error_message().find("ps.shards"), std::string::npos)
      << extra.status.error_message();
  RegisterShardRequest bad = Shard("s2", 5002);
  bad.set_address("no-port");
  EXPECT_EQ(Register(*stub, bad).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  RegisterShardRequest old = Shard("s3", 5003);
  old.set_protocol_version(0);
  EXPECT_EQ(Register(*stub, old).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  ClusterSpec c;
  auto allreduce = testing::StartCoordinator(c);
  auto stub2 = testing::NewStub(allreduce->address());
  const auto refused = Register(*stub2, Shard("s0", 5000));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.status.error_message().find("mode: PS"), std::string::npos)
      << refused.status.error_message();
}

TEST(PsCoordination, PlanIsFixedByTheFirstWorkerAndShownInStatus) {
  auto server = StartPs(2, 2);
  auto stub = testing::NewStub(server->address());
  ASSERT_TRUE(Register(*stub, Shard("s0", 5000)).status.ok());
  ASSERT_TRUE(Register(*stub, Shard("s1", 5001)).status.ok());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  const std::vector<int64_t> sizes = {100, 600000, 10};  // 1 MiB partitions
  const auto a = Plan(*stub, joined[0], sizes);
  const auto b = Plan(*stub, joined[1], sizes);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  EXPECT_EQ(a.response.SerializeAsString(), b.response.SerializeAsString());
  int64_t covered = 0;
  for (const Partition& p : a.response.partitions()) covered += p.count();
  EXPECT_EQ(covered, 600110);

  const auto differs = Plan(*stub, joined[1], {100, 600000, 11});
  EXPECT_EQ(differs.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(differs.status.error_message().find("first difference at tensor 2"),
            std::string::npos)
      << differs.status.error_message();
  JoinResponse stale = joined[0];
  stale.set_generation(7);
  EXPECT_EQ(Plan(*stub, stale, sizes).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Plan(*stub, joined[0], {0}).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  const StatusResponse status = testing::GetStatus(*stub);
  ASSERT_EQ(status.shards_size(), 2);
  EXPECT_EQ(status.partitions_size(), a.response.partitions_size());
  EXPECT_EQ(status.shards(0).parameters() + status.shards(1).parameters(),
            600110);
  EXPECT_EQ(status.shards(1).address(), "127.0.0.1:5001");
}

TEST(PsCoordination, SilentShardFailsTheJobNamingIt) {
  auto server = StartPs(1, 1, /*heartbeat_ms=*/200);
  auto stub = testing::NewStub(server->address());
  ASSERT_TRUE(Register(*stub, Shard("s0", 5000)).status.ok());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 1);
  ASSERT_TRUE(ShardBeat(*stub, "s0", 0).ok());
  EXPECT_EQ(ShardBeat(*stub, "s9", 0).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  const Clock::time_point start = Clock::now();
  StatusResponse status;
  while (Clock::now() - start < std::chrono::seconds(5)) {
    // The worker keeps beating; the shard does not.
    testing::Heartbeat(*stub, joined[0], "w0");
    status = testing::GetStatus(*stub);
    if (status.state() == FAILED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status.state(), FAILED);
  EXPECT_NE(status.reason().find("shard 0 at 127.0.0.1:5000"),
            std::string::npos)
      << status.reason();
  // 3 x 200 ms + the watchdog's tick, with slack for a busy machine.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.5);
}

}  // namespace
}  // namespace cohort
