#include "server/ps/shard_process.h"

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Registers one shard, then answers `beats_before_stop` heartbeats with
// RUNNING and the next with stop and `end_state`.
class FakeCoordinator final : public Coordinator::Service {
 public:
  FakeCoordinator(int beats_before_stop, JobState end_state)
      : beats_before_stop_(beats_before_stop), end_state_(end_state) {}

  grpc::Status RegisterShard(grpc::ServerContext*,
                             const RegisterShardRequest* req,
                             RegisterShardResponse* resp) override {
    absl::MutexLock lock(&mu_);
    registered_ = *req;
    resp->set_shard_index(0);
    resp->set_num_shards(1);
    resp->mutable_job()->mutable_cluster()->set_heartbeat_interval_ms(50);
    resp->mutable_job()->mutable_cluster()->set_heartbeat_misses(3);
    return grpc::Status::OK;
  }
  grpc::Status ShardHeartbeat(grpc::ServerContext*,
                              const ShardHeartbeatRequest* req,
                              ShardHeartbeatResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++beats_;
    last_ = *req;
    if (beats_ > beats_before_stop_) {
      resp->set_stop(true);
      resp->set_state(end_state_);
      resp->set_reason("rank 1 crashed");
    } else {
      resp->set_state(RUNNING);
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  const int beats_before_stop_;
  const JobState end_state_;
  int beats_ = 0;
  RegisterShardRequest registered_;
  ShardHeartbeatRequest last_;
};

struct Running {
  FakeCoordinator fake;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  Running(int beats, JobState end) : fake(beats, end) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&fake);
    server = b.BuildAndStart();
  }
  ~Running() { server->Shutdown(); }
};

TEST(ShardProcessTest, RegistersHeartbeatsAndExitsWhenTheJobSucceeds) {
  Running c(3, SUCCEEDED);
  ShardProcessOptions o;
  o.coordinator = "127.0.0.1:" + std::to_string(c.port);
  o.listen = "127.0.0.1:0";
  absl::Status s = RunShardProcess(o);
  EXPECT_TRUE(s.ok()) << s;
  absl::MutexLock lock(&c.fake.mu_);
  EXPECT_EQ(c.fake.beats_, 4);
  EXPECT_EQ(c.fake.registered_.protocol_version(), Protocol::CURRENT);
  EXPECT_THAT(c.fake.registered_.address(), StartsWith("127.0.0.1:"));
  EXPECT_NE(c.fake.registered_.address(), "127.0.0.1:0");
  EXPECT_FALSE(c.fake.registered_.shard_id().empty());
  EXPECT_EQ(c.fake.last_.stats().staleness_histogram_size(), 9);
}

TEST(ShardProcessTest, ReportsTheReasonWhenTheJobFailed) {
  Running c(0, FAILED);
  ShardProcessOptions o;
  o.coordinator = "127.0.0.1:" + std::to_string(c.port);
  o.listen = "127.0.0.1:0";
  absl::Status s = RunShardProcess(o);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 crashed"));
}

}  // namespace
}  // namespace cohort
