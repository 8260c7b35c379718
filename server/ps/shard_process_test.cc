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
  FakeCoordinator(int beats_before_stop, JobState end_state,
                  int out_features = 10)
      : beats_before_stop_(beats_before_stop),
        end_state_(end_state),
        out_features_(out_features) {}

  grpc::Status RegisterShard(grpc::ServerContext*,
                             const RegisterShardRequest* req,
                             RegisterShardResponse* resp) override {
    absl::MutexLock lock(&mu_);
    registered_ = *req;
    resp->set_shard_index(0);
    resp->set_num_shards(1);
    resp->mutable_job()->mutable_cluster()->set_heartbeat_interval_ms(50);
    resp->mutable_job()->mutable_cluster()->set_heartbeat_misses(3);
    JobSpec* job = resp->mutable_job();
    job->set_mode(PS);
    job->mutable_ps()->set_partition_bytes(4 << 20);
    job->mutable_data()->mutable_synthetic()->add_shape(100);
    job->mutable_model()->add_layers()->mutable_linear()->set_out_features(
        out_features_);
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
  const int out_features_;
  int beats_ = 0;
  RegisterShardRequest registered_;
  ShardHeartbeatRequest last_;
};

struct Running {
  FakeCoordinator fake;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  Running(int beats, JobState end, int out_features = 10)
      : fake(beats, end, out_features) {
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

// A shard that cannot hold its slice of the parameters says so, tells the
// coordinator (which fails the job with the reason) and does not serve.
TEST(ShardProcessTest, RefusesASliceLargerThanItsMemory) {
  Running c(3, SUCCEEDED, /*out_features=*/100000000);  // 10^10 parameters
  ShardProcessOptions o;
  o.coordinator = "127.0.0.1:" + std::to_string(c.port);
  o.listen = "127.0.0.1:0";
  o.available_memory = int64_t{1} << 30;
  absl::Status s = RunShardProcess(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("shard 0 at 127.0.0.1:"));
  EXPECT_THAT(s.message(), HasSubstr("cannot serve: its "));
  EXPECT_THAT(s.message(), HasSubstr("and this machine has 1.0 GiB available"));
  absl::MutexLock lock(&c.fake.mu_);
  EXPECT_THAT(c.fake.last_.failure(), HasSubstr("cannot serve: its "));
}

}  // namespace
}  // namespace cohort
