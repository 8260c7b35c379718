// Rendezvous through the coordinator's gRPC API: ranks and offsets, the
// last-call window, timeouts, refusals, idempotent joins, seeds.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "server/job_tracker.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using testing::Join;
using testing::MakeJoin;
using testing::Reply;
using Clock = std::chrono::steady_clock;

ClusterSpec Cluster(int min_workers, int max_workers, int last_call_ms = 0,
                    int join_timeout_ms = 0) {
  ClusterSpec c;
  c.set_min_workers(min_workers);
  c.set_max_workers(max_workers);
  c.set_last_call_ms(last_call_ms);
  c.set_join_timeout_ms(join_timeout_ms);
  return c;
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Waits until `n` workers are waiting in Join (status lists them).
void AwaitJoiners(Coordinator::Stub& stub, int n) {
  const Clock::time_point start = Clock::now();
  while (testing::GetStatus(stub).workers_size() < n) {
    ASSERT_LT(SecondsSince(start), 5) << "joiners never showed up";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(Rendezvous, TwoWorkersGetRanksOffsetsAndGenerationOne) {
  auto server = testing::StartCoordinator(Cluster(2, 2));
  auto stub = testing::NewStub(server->address());
  Reply<JoinResponse> first;
  std::thread w0([&] { first = Join(*stub, MakeJoin("w0", 2)); });
  AwaitJoiners(*stub, 1);
  const Reply<JoinResponse> second = Join(*stub, MakeJoin("w1", 3));
  w0.join();
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  const JoinResponse& a = first.response;
  const JoinResponse& b = second.response;
  EXPECT_EQ(a.generation(), 1u);
  EXPECT_EQ(b.generation(), 1u);
  EXPECT_EQ(a.rank(), 0);
  EXPECT_EQ(b.rank(), 1);
  EXPECT_EQ(a.world_size(), 2);
  EXPECT_EQ(a.replica_offset(), 0);
  EXPECT_EQ(b.replica_offset(), 2);
  EXPECT_EQ(a.total_replicas(), 5);
  EXPECT_EQ(b.total_replicas(), 5);
  EXPECT_EQ(a.job_seed(), 42u);
  EXPECT_EQ(a.kv_prefix(), "g1/");
  EXPECT_EQ(a.epoch(), 0);
  EXPECT_EQ(a.job().name(), "test");
  // The cluster defaults are filled for the workers.
  EXPECT_EQ(a.job().cluster().heartbeat_interval_ms(), 1000);
  EXPECT_EQ(a.job().cluster().heartbeat_misses(), 3);
  EXPECT_EQ(a.job().cluster().bucket_bytes(), 25 << 20);
  EXPECT_EQ(a.job().cluster().allreduce_algorithm(), "halving_doubling");
  const StatusResponse s = testing::GetStatus(*stub);
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_EQ(s.generation(), 1u);
  EXPECT_EQ(s.world_size(), 2);
  ASSERT_EQ(s.workers_size(), 2);
  EXPECT_EQ(s.workers(1).host(), "host-w1");
  EXPECT_EQ(s.workers(1).replicas(), 3);
}

TEST(Rendezvous, LastCallWindowStartsAtTheMinimum) {
  // Without restarts a running job keeps its world (no growth).
  ClusterSpec fixed = Cluster(2, 3, 300);
  fixed.set_max_restarts(0);
  auto server = testing::StartCoordinator(fixed);
  auto stub = testing::NewStub(server->address());
  const Clock::time_point start = Clock::now();
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  const double waited = SecondsSince(start);
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 2.0);
  EXPECT_EQ(joined[0].world_size(), 2);
  EXPECT_EQ(joined[0].generation(), 1u);
  // The round is closed: a late third worker is told so.
  const Reply<JoinResponse> late = Join(*stub, MakeJoin("w9"));
  EXPECT_EQ(late.status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_NE(late.status.error_message().find("already running"),
            std::string::npos)
      << late.status.error_message();
}

TEST(Rendezvous, MaxWorkersEndsTheLastCallEarly) {
  auto server = testing::StartCoordinator(Cluster(1, 2, 10000));
  auto stub = testing::NewStub(server->address());
  const Clock::time_point start = Clock::now();
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  EXPECT_LT(SecondsSince(start), 2.0);
  EXPECT_EQ(joined[0].world_size(), 2);
  EXPECT_EQ(joined[1].world_size(), 2);
  EXPECT_NE(joined[0].rank(), joined[1].rank());
}

TEST(Rendezvous, JoinTimeoutSaysWhoJoinedAndHowManyAreMissing) {
  auto server = testing::StartCoordinator(Cluster(3, 3, 0, 300));
  auto stub = testing::NewStub(server->address());
  Reply<JoinResponse> first;
  std::thread w0([&] { first = Join(*stub, MakeJoin("w0")); });
  AwaitJoiners(*stub, 1);
  const Reply<JoinResponse> second = Join(*stub, MakeJoin("w1"));
  w0.join();
  EXPECT_EQ(first.status.error_code(), grpc::DEADLINE_EXCEEDED);
  const std::string& m = second.status.error_message();
  EXPECT_EQ(second.status.error_code(), grpc::DEADLINE_EXCEEDED) << m;
  EXPECT_NE(m.find("of 3 needed workers joined"), std::string::npos) << m;
  EXPECT_NE(m.find("host-w1:1001"), std::string::npos) << m;
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  // Workers that gave up are no longer counted.
  EXPECT_EQ(testing::GetStatus(*stub).workers_size(), 0);
}

TEST(Rendezvous, LateWorkerGrowsAnElasticJobAndMembersRejoin) {
  ClusterSpec elastic = Cluster(1, 2, 100);
  elastic.set_max_restarts(1);
  auto server = testing::StartCoordinator(elastic);
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> first = testing::JoinAll(*stub, 1);
  ASSERT_EQ(first[0].world_size(), 1);
  Reply<JoinResponse> late;
  std::thread w1([&] { late = Join(*stub, MakeJoin("w1")); });
  // w0 learns from its heartbeat that generation 1 is over.
  Reply<HeartbeatResponse> beat;
  const Clock::time_point start = Clock::now();
  do {
    beat = testing::Heartbeat(*stub, first[0], "w0");
    ASSERT_TRUE(beat.status.ok()) << beat.status.error_message();
    ASSERT_LT(SecondsSince(start), 5) << "never told to regroup";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (!beat.response.regroup());
  EXPECT_FALSE(beat.response.stop());
  EXPECT_EQ(beat.response.state(), RUNNING);
  StatusResponse s = testing::GetStatus(*stub);
  EXPECT_TRUE(s.regrouping());
  EXPECT_EQ(s.regroup_reason(), "growth: worker host-w1:1001 joined");
  JoinRequest rejoin = MakeJoin("w0");
  rejoin.set_leaving_generation(1);
  const Reply<JoinResponse> again = Join(*stub, rejoin);
  w1.join();
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  ASSERT_TRUE(late.status.ok()) << late.status.error_message();
  EXPECT_EQ(again.response.generation(), 2u);
  EXPECT_EQ(again.response.rank(), 0);
  EXPECT_EQ(late.response.rank(), 1);
  EXPECT_EQ(late.response.world_size(), 2);
  EXPECT_EQ(late.response.kv_prefix(), "g2/");
  EXPECT_EQ(late.response.restarts(), 0);
  // The old generation is fenced.
  const Reply<HeartbeatResponse> stale =
      testing::Heartbeat(*stub, first[0], "w0");
  EXPECT_EQ(stale.status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_NE(stale.status.error_message().find("generation 1 is over"),
            std::string::npos)
      << stale.status.error_message();
  s = testing::GetStatus(*stub);
  EXPECT_FALSE(s.regrouping());
  EXPECT_EQ(s.world_size(), 2);
  ASSERT_EQ(s.generations_size(), 2);
  EXPECT_EQ(s.generations(1).cause(), "growth: worker host-w1:1001 joined");
}

TEST(Rendezvous, ExtraWorkerIsRefusedClearly) {
  auto server = testing::StartCoordinator(Cluster(1, 1));
  auto stub = testing::NewStub(server->address());
  ASSERT_TRUE(Join(*stub, MakeJoin("w0")).status.ok());
  const Reply<JoinResponse> extra = Join(*stub, MakeJoin("w1"));
  EXPECT_EQ(extra.status.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(extra.status.error_message().find(
                "the job already has its maximum of 1 workers"),
            std::string::npos)
      << extra.status.error_message();
  // The refused worker learns which setting to raise, and so does whoever
  // asks the coordinator.
  EXPECT_NE(extra.status.error_message().find("--max-workers"),
            std::string::npos)
      << extra.status.error_message();
  const StatusResponse s = testing::GetStatus(*stub);
  EXPECT_EQ(s.refused_workers(), 1);
  EXPECT_NE(s.last_refusal().find("host-w1"), std::string::npos)
      << s.last_refusal();
  EXPECT_NE(s.last_refusal().find("cluster.max_workers"), std::string::npos)
      << s.last_refusal();
}

TEST(Rendezvous, OtherProtocolVersionIsRefused) {
  auto server = testing::StartCoordinator(Cluster(1, 1));
  auto stub = testing::NewStub(server->address());
  const uint32_t current = Protocol::CURRENT;
  for (uint32_t version : {0u, 1u, current + 1}) {
    JoinRequest r = MakeJoin("w0");
    r.set_protocol_version(version);
    const Reply<JoinResponse> reply = Join(*stub, r);
    const std::string& m = reply.status.error_message();
    EXPECT_EQ(reply.status.error_code(), grpc::FAILED_PRECONDITION) << m;
    EXPECT_NE(m.find("protocol version " + std::to_string(version)),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("speaks version " + std::to_string(current)),
              std::string::npos)
        << m;
  }
}

TEST(Rendezvous, RepeatedJoinOfOneWorkerIsTheSameWorker) {
  auto server = testing::StartCoordinator(Cluster(2, 2));
  auto stub = testing::NewStub(server->address());
  Reply<JoinResponse> a, b;
  std::thread t1([&] { a = Join(*stub, MakeJoin("w0")); });
  std::thread t2([&] { b = Join(*stub, MakeJoin("w0")); });
  AwaitJoiners(*stub, 1);
  const Reply<JoinResponse> other = Join(*stub, MakeJoin("w1"));
  t1.join();
  t2.join();
  ASSERT_TRUE(a.status.ok() && b.status.ok() && other.status.ok());
  EXPECT_EQ(a.response.world_size(), 2);
  EXPECT_EQ(a.response.rank(), b.response.rank());
  EXPECT_NE(a.response.rank(), other.response.rank());
  // After the round, a retried Join gets the same place back.
  const Reply<JoinResponse> again = Join(*stub, MakeJoin("w1"));
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.response.rank(), other.response.rank());
  EXPECT_EQ(again.response.generation(), 1u);
}

TEST(Rendezvous, ClientThatGivesUpLeavesTheRound) {
  auto server = testing::StartCoordinator(Cluster(2, 2));
  auto stub = testing::NewStub(server->address());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(200));
  JoinResponse response;
  const grpc::Status s = stub->Join(&context, MakeJoin("w0"), &response);
  EXPECT_EQ(s.error_code(), grpc::DEADLINE_EXCEEDED);
  const Clock::time_point start = Clock::now();
  while (testing::GetStatus(*stub).workers_size() != 0) {
    ASSERT_LT(SecondsSince(start), 2) << "the abandoned join stayed";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(Rendezvous, StopAndShutdownReleaseBlockedJoins) {
  auto server = testing::StartCoordinator(Cluster(2, 2));
  auto stub = testing::NewStub(server->address());
  Reply<JoinResponse> stopped;
  std::thread t([&] { stopped = Join(*stub, MakeJoin("w0")); });
  AwaitJoiners(*stub, 1);
  grpc::ClientContext context;
  StopRequest stop;
  StopResponse ignored;
  ASSERT_TRUE(stub->Stop(&context, stop, &ignored).ok());
  t.join();
  EXPECT_EQ(stopped.status.error_code(), grpc::ABORTED);
  EXPECT_NE(stopped.status.error_message().find("stopped by request"),
            std::string::npos)
      << stopped.status.error_message();

  auto second = testing::StartCoordinator(Cluster(2, 2));
  auto stub2 = testing::NewStub(second->address());
  Reply<JoinResponse> shut;
  std::thread t2([&] { shut = Join(*stub2, MakeJoin("w0")); });
  AwaitJoiners(*stub2, 1);
  const Clock::time_point start = Clock::now();
  second->Shutdown();
  t2.join();
  EXPECT_LT(SecondsSince(start), 2.0);
  // Final (workers retry UNAVAILABLE), and says why.
  EXPECT_EQ(shut.status.error_code(), grpc::ABORTED);
  EXPECT_NE(shut.status.error_message().find("the coordinator shut down"),
            std::string::npos)
      << shut.status.error_message();
  EXPECT_EQ(second->Wait(), STOPPED);
}

TEST(Rendezvous, ManyConcurrentWorkersFormOneRound) {
  constexpr int kWorkers = 64;
  auto server = testing::StartCoordinator(Cluster(kWorkers, kWorkers));
  std::vector<Reply<JoinResponse>> replies(kWorkers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      // Each its own connection, as worker processes have: the coordinator
      // bounds the joins waiting on one connection (server/call_limiter.h).
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto stub = Coordinator::NewStub(grpc::CreateCustomChannel(
          server->address(), grpc::InsecureChannelCredentials(), args));
      replies[i] = Join(*stub, MakeJoin("w" + std::to_string(i), 1 + i % 3));
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<int> replicas_of_rank(kWorkers, -1), offset_of_rank(kWorkers);
  for (int i = 0; i < kWorkers; ++i) {
    ASSERT_TRUE(replies[i].status.ok()) << replies[i].status.error_message();
    const JoinResponse& r = replies[i].response;
    ASSERT_EQ(r.world_size(), kWorkers);
    ASSERT_EQ(replicas_of_rank[r.rank()], -1) << "rank given twice";
    replicas_of_rank[r.rank()] = 1 + i % 3;
    offset_of_rank[r.rank()] = r.replica_offset();
  }
  int offset = 0;
  for (int rank = 0; rank < kWorkers; ++rank) {
    EXPECT_EQ(offset_of_rank[rank], offset) << "rank " << rank;
    offset += replicas_of_rank[rank];
  }
  EXPECT_EQ(replies[0].response.total_replicas(), offset);
}

TEST(Rendezvous, EpochSeedsAgreeAcrossWorkersAndDifferAcrossEpochs) {
  auto server = testing::StartCoordinator(Cluster(2, 2));
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  auto seed = [&](int rank, int64_t epoch) {
    grpc::ClientContext context;
    BeginEpochRequest r;
    r.set_generation(joined[0].generation());
    r.set_rank(rank);
    r.set_epoch(epoch);
    BeginEpochResponse response;
    EXPECT_TRUE(stub->BeginEpoch(&context, r, &response).ok());
    return response.sampler_seed();
  };
  EXPECT_EQ(seed(0, 0), seed(1, 0));
  EXPECT_EQ(seed(0, 3), seed(1, 3));
  EXPECT_NE(seed(0, 0), seed(0, 1));
  EXPECT_EQ(seed(1, 3), SamplerSeed(42, 3));
  EXPECT_EQ(testing::GetStatus(*stub).epoch(), 3);
}

}  // namespace
}  // namespace cohort
