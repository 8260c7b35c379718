#include "server/ps/shard_process.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "server/ps/shard_checkpoint.h"
#include "server/ps/shard_state.h"

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

// A replacement for shard 0 of a SYNC job of two workers: its checkpoint
// holds the state right after Init, and the coordinator answers its
// heartbeats with `workers_clock` until `stop`.
class ReplacementCoordinator final : public Coordinator::Service {
 public:
  ReplacementCoordinator(const JobSpec& job, const Partition& partition,
                         int64_t workers_clock)
      : job_(job), partition_(partition), workers_clock_(workers_clock) {}

  grpc::Status RegisterShard(grpc::ServerContext*,
                             const RegisterShardRequest* req,
                             RegisterShardResponse* resp) override {
    absl::MutexLock lock(&mu_);
    address_ = req->address();
    resp->set_shard_index(0);
    resp->set_num_shards(1);
    *resp->mutable_job() = job_;
    resp->set_run_id("run-1");
    resp->set_restore(true);
    *resp->add_partitions() = partition_;
    resp->set_world_size(2);
    resp->set_total_replicas(2);
    return grpc::Status::OK;
  }
  grpc::Status ShardHeartbeat(grpc::ServerContext*,
                              const ShardHeartbeatRequest*,
                              ShardHeartbeatResponse* resp) override {
    absl::MutexLock lock(&mu_);
    resp->set_state(stop_ ? SUCCEEDED : RUNNING);
    resp->set_stop(stop_);
    resp->set_workers_clock(workers_clock_);
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  const JobSpec job_;
  const Partition partition_;
  const int64_t workers_clock_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

JobSpec SyncJob(const std::string& checkpoint_dir) {
  JobSpec job;
  job.set_mode(PS);
  job.mutable_cluster()->set_heartbeat_interval_ms(50);
  job.mutable_cluster()->set_heartbeat_misses(3);
  job.mutable_ps()->set_consistency(SYNC);
  job.mutable_ps()->set_partition_bytes(4 << 20);
  job.mutable_ps()->set_rpc_timeout_ms(5000);
  job.mutable_data()->mutable_synthetic()->add_shape(100);
  job.mutable_model()->add_layers()->mutable_linear()->set_out_features(10);
  job.mutable_checkpoint()->set_dir(checkpoint_dir);
  job.mutable_checkpoint()->set_every_steps(10);
  return job;
}

// Shard 0's checkpoint of `job` right after Init (every clock 0).
void WriteInitCheckpoint(const JobSpec& job, const Partition& p) {
  ShardState state(job, 0);
  InitHeader h;
  h.set_worker_id("w0");
  *h.add_partitions() = p;
  h.set_world_size(2);
  h.set_total_replicas(2);
  ASSERT_TRUE(state.Init(h, {std::vector<float>(p.count(), 1.0f)}).ok());
  absl::StatusOr<ShardState::Capture> c = state.CaptureNow();
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(WriteCheckpoint(ShardCheckpointDir(job.checkpoint().dir(), 0),
                              EncodeShardCheckpoint(*c, job, "run-1"))
                  .ok());
}

// Rank 1's pull of `clock` from the shard at `address`, retried while the
// shard is still restoring, each attempt waiting at most `wait`.
grpc::Status PullOnce(const std::string& address, int64_t clock,
                      absl::Duration wait) {
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::Status s;
  for (int attempt = 0; attempt < 50; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + wait));
    ctx.set_wait_for_ready(true);
    PullRequest req;
    req.set_worker_id("w1");
    req.set_rank(1);
    req.set_clock(clock);
    std::unique_ptr<grpc::ClientReader<PullResponse>> reader =
        stub->Pull(&ctx, req);
    PullResponse resp;
    while (reader->Read(&resp)) {
    }
    s = reader->Finish();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return s;
}

// Runs a replacement shard against `coordinator` until `pull` returns.
grpc::Status PullFromReplacement(ReplacementCoordinator& coordinator,
                                 int64_t clock, absl::Duration wait) {
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&coordinator);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ShardProcessOptions o;
  o.coordinator = absl::StrCat("127.0.0.1:", port);
  o.listen = "127.0.0.1:0";
  absl::Status ran;
  std::thread shard([&] { ran = RunShardProcess(o); });
  std::string address;
  for (int i = 0; i < 200 && address.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    absl::MutexLock lock(&coordinator.mu_);
    address = coordinator.address_;
  }
  const grpc::Status pulled = PullOnce(address, clock, wait);
  {
    absl::MutexLock lock(&coordinator.mu_);
    coordinator.stop_ = true;
  }
  shard.join();
  server->Shutdown();
  EXPECT_TRUE(ran.ok()) << ran;
  return pulled;
}

// The dead shard applied steps 0-4 after its checkpoint (taken at Init);
// rank 0 had the parameters for step 5 and went on to an evaluation, which
// waits for rank 1; rank 1's pull of step 5 reaches the replacement. The
// coordinator's workers_clock (rank 0 reported 5 steps) answers it; without
// it the pull would wait for rank 0, which never pulls again.
TEST(ShardProcessTest, ReplacementSkipsTheStepsTheWorkersReportDone) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(root != nullptr ? root : "/tmp", "/replacement-", getpid());
  mkdir(dir.c_str(), 0755);
  const JobSpec job = SyncJob(dir);
  Partition p;
  p.set_id(0);
  p.set_count(1010);
  WriteInitCheckpoint(job, p);

  ReplacementCoordinator without(job, p, /*workers_clock=*/0);
  EXPECT_EQ(
      PullFromReplacement(without, 5, absl::Milliseconds(500)).error_code(),
      grpc::StatusCode::DEADLINE_EXCEEDED);

  ReplacementCoordinator with(job, p, /*workers_clock=*/5);
  const absl::Time start = absl::Now();
  const grpc::Status s = PullFromReplacement(with, 5, absl::Seconds(5));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace cohort
