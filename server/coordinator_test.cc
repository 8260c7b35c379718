// The coordinator over real gRPC on loopback: heartbeats and the watchdog,
// Finish/Stop, the KV store and the report.
#include "server/coordinator.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Reply;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

ClusterSpec Workers(int n) {
  ClusterSpec c;
  c.set_min_workers(n);
  return c;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Heartbeat, SilentWorkerFailsTheJobWithinTheBound) {
  ClusterSpec c = Workers(2);
  c.set_heartbeat_interval_ms(100);
  c.set_heartbeat_misses(3);
  auto server = testing::StartCoordinator(c);
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  const Clock::time_point formed = Clock::now();
  // w0 keeps beating until told to stop; w1 never beats.
  Reply<HeartbeatResponse> last;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    last = testing::Heartbeat(*stub, joined[0], "w0");
    ASSERT_TRUE(last.status.ok()) << last.status.error_message();
    ASSERT_LT(SecondsSince(formed), 5) << "the silent worker went unnoticed";
  } while (!last.response.stop());
  EXPECT_LT(SecondsSince(formed), 0.3 + 1.0);
  EXPECT_EQ(last.response.state(), FAILED);
  const std::string expected =
      absl::StrCat("worker rank ", joined[1].rank(),
                   " (host host-w1, pid 1001) missed heartbeats for ");
  EXPECT_TRUE(Contains(last.response.reason(), expected))
      << last.response.reason();
  EXPECT_EQ(testing::GetStatus(*stub).reason(), last.response.reason());
  // An answer telling the end may go unread (a worker's deadline passing on
  // a loaded machine): the coordinator stays for w0 until it says it heard
  // the end by finishing, and then does not linger.
  const Clock::time_point start = Clock::now();
  std::atomic<bool> waited{false};
  std::thread wait([&] {
    EXPECT_EQ(server->Wait(), FAILED);
    waited = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(waited) << "the coordinator left before w0 finished";
  ASSERT_TRUE(
      testing::Finish(*stub, joined[0], "w0", false, "the job failed").ok());
  wait.join();
  EXPECT_LT(SecondsSince(start), 1.0);
}

TEST(Heartbeat, BeatingWorkersKeepTheJobRunningAndReportProgress) {
  ClusterSpec c = Workers(1);
  c.set_heartbeat_interval_ms(100);
  c.set_heartbeat_misses(2);
  auto server = testing::StartCoordinator(c);
  auto stub = testing::NewStub(server->address());
  const JoinResponse joined = testing::JoinAll(*stub, 1)[0];
  for (int i = 0; i < 10; ++i) {
    grpc::ClientContext context;
    HeartbeatRequest r;
    r.set_generation(1);
    r.set_worker_id("w0");
    r.set_rank(0);
    r.mutable_progress()->set_step(i);
    r.mutable_progress()->set_samples_per_s(100 + i);
    HeartbeatResponse response;
    ASSERT_TRUE(stub->Heartbeat(&context, r, &response).ok());
    EXPECT_EQ(response.state(), RUNNING);
    EXPECT_FALSE(response.stop());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const StatusResponse s = testing::GetStatus(*stub);
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_EQ(s.step(), 9);
  EXPECT_LT(s.workers(0).heartbeat_age_s(), 0.2);
  grpc::ClientContext context;
  MetricsResponse m;
  ASSERT_TRUE(stub->GetMetrics(&context, MetricsRequest(), &m).ok());
  EXPECT_DOUBLE_EQ(m.samples_per_s(), 109);
}

// Worker `rank` reports step `step` with `busy` seconds of its own work
// per step (and waiting on top, which must not count).
void Beat(Coordinator::Stub& stub, int rank, int64_t step, double busy) {
  grpc::ClientContext context;
  HeartbeatRequest r;
  r.set_generation(1);
  r.set_worker_id(absl::StrCat("w", rank));
  r.set_rank(rank);
  r.mutable_progress()->set_step(step);
  StepTimes* t = r.mutable_progress()->mutable_times();
  t->set_data_s(busy * 0.1);
  t->set_compute_s(busy * 0.8);
  t->set_optimizer_s(busy * 0.1);
  t->set_comm_wait_s(0.5);
  HeartbeatResponse response;
  ASSERT_TRUE(stub.Heartbeat(&context, r, &response).ok());
}

TEST(Stragglers, ThreeTimesSlowerFor20StepsIsFlaggedAndClearedWhenItRecovers) {
  auto server = testing::StartCoordinator(Workers(4));
  auto stub = testing::NewStub(server->address());
  testing::JoinAll(*stub, 4);
  // Rank 3 is 3x slower, rank 2 1.4x (below the 1.5x bar); 5 steps a beat.
  const double busy[] = {0.010, 0.011, 0.014, 0.030};
  for (int beat = 1; beat <= 5; ++beat) {
    for (int rank = 0; rank < 4; ++rank)
      Beat(*stub, rank, 5 * beat, busy[rank]);
    const StatusResponse s = testing::GetStatus(*stub);
    // 5 slow steps a beat: the 20th comes with the 4th beat.
    EXPECT_EQ(s.workers(3).straggler(), beat >= 4) << "beat " << beat;
    EXPECT_FALSE(s.workers(2).straggler());
  }
  StatusResponse s = testing::GetStatus(*stub);
  EXPECT_NEAR(s.workers(3).busy_vs_median(), 0.030 / 0.011, 1e-9);
  EXPECT_NEAR(s.workers(3).step_busy_s(), 0.030, 1e-9);
  ASSERT_EQ(s.stragglers_size(), 1);
  EXPECT_EQ(s.stragglers(0), "rank 3 on host-w3: 2.7x the median step");
  grpc::ClientContext context;
  MetricsResponse m;
  ASSERT_TRUE(stub->GetMetrics(&context, MetricsRequest(), &m).ok());
  EXPECT_EQ(m.stragglers_size(), 1);
  EXPECT_TRUE(m.workers(3).straggler());
  // Back to normal speed: no longer flagged.
  for (int rank = 0; rank < 4; ++rank) Beat(*stub, rank, 30, 0.010);
  s = testing::GetStatus(*stub);
  EXPECT_FALSE(s.workers(3).straggler());
  EXPECT_EQ(s.stragglers_size(), 0);
}

TEST(Join, AFloodOfJoinsIsRateLimitedWithUnavailable) {
  auto server = testing::StartCoordinator(Workers(2));
  auto stub = testing::NewStub(server->address());
  testing::JoinAll(*stub, 2);
  int full = 0, limited = 0;
  for (int i = 0; i < 100; ++i) {
    const auto r =
        testing::Join(*stub, testing::MakeJoin(absl::StrCat("x", i)));
    if (r.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++full;
    if (r.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      ++limited;
      EXPECT_TRUE(Contains(r.status.error_message(), "too many join attempts"))
          << r.status.error_message();
    }
  }
  // 64 tokens less the 2 real joins, plus what refills meanwhile.
  EXPECT_GE(full, 60);
  EXPECT_GE(limited, 20);
  EXPECT_EQ(full + limited, 100);
}

TEST(Heartbeat, FinishedWorkersAreNoLongerWatched) {
  ClusterSpec c = Workers(2);
  // A 1 s bound that w1's beats every 50 ms meet even on a loaded machine.
  c.set_heartbeat_interval_ms(100);
  c.set_heartbeat_misses(10);
  auto server = testing::StartCoordinator(c);
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  ASSERT_TRUE(testing::Finish(*stub, joined[0], "w0", true).ok());
  for (int i = 0; i < 30; ++i) {  // >= 1.5 s: past w0's bound
    ASSERT_TRUE(testing::Heartbeat(*stub, joined[1], "w1").status.ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(testing::GetStatus(*stub).state(), RUNNING);
  ASSERT_TRUE(testing::Finish(*stub, joined[1], "w1", true).ok());
  EXPECT_EQ(server->Wait(), SUCCEEDED);
}

TEST(Finish, EveryWorkerOkSucceeds) {
  auto server = testing::StartCoordinator(Workers(2));
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  ASSERT_TRUE(testing::Finish(*stub, joined[0], "w0", true).ok());
  EXPECT_EQ(testing::GetStatus(*stub).state(), RUNNING);
  ASSERT_TRUE(testing::Finish(*stub, joined[1], "w1", true).ok());
  EXPECT_EQ(testing::GetStatus(*stub).state(), SUCCEEDED);
  EXPECT_EQ(server->Wait(), SUCCEEDED);
}

TEST(Finish, OneFailedWorkerFailsTheJobAndOthersAreTold) {
  auto server = testing::StartCoordinator(Workers(2));
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  ASSERT_TRUE(
      testing::Finish(*stub, joined[1], "w1", false, "out of memory").ok());
  const StatusResponse s = testing::GetStatus(*stub);
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_EQ(s.reason(), absl::StrCat("worker rank ", joined[1].rank(),
                                     " (host host-w1): out of memory"));
  const Reply<HeartbeatResponse> beat =
      testing::Heartbeat(*stub, joined[0], "w0");
  EXPECT_TRUE(beat.response.stop());
  EXPECT_EQ(beat.response.reason(), s.reason());
  EXPECT_EQ(server->Wait(), FAILED);
}

TEST(Stop, StopsTheJobWithTheReason) {
  auto server = testing::StartCoordinator(Workers(1));
  auto stub = testing::NewStub(server->address());
  const JoinResponse joined = testing::JoinAll(*stub, 1)[0];
  grpc::ClientContext context;
  StopRequest stop;
  stop.set_reason("maintenance");
  StopResponse ignored;
  ASSERT_TRUE(stub->Stop(&context, stop, &ignored).ok());
  const Reply<HeartbeatResponse> beat = testing::Heartbeat(*stub, joined, "w0");
  EXPECT_EQ(beat.response.state(), STOPPED);
  EXPECT_TRUE(beat.response.stop());
  EXPECT_EQ(beat.response.reason(), "maintenance");
  EXPECT_EQ(server->Wait(), STOPPED);
}

TEST(Stop, ServeAfterDoneWaitsForStop) {
  auto server = testing::StartCoordinator(Workers(1), "", true);
  auto stub = testing::NewStub(server->address());
  const JoinResponse joined = testing::JoinAll(*stub, 1)[0];
  ASSERT_TRUE(testing::Finish(*stub, joined, "w0", true).ok());
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_EQ(server->Wait(), SUCCEEDED);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned);
  EXPECT_EQ(testing::GetStatus(*stub).state(), SUCCEEDED);
  grpc::ClientContext context;
  StopResponse ignored;
  ASSERT_TRUE(stub->Stop(&context, StopRequest(), &ignored).ok());
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_EQ(testing::GetStatus(*stub).reason(), "");  // still SUCCEEDED
}

class KvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartCoordinator(Workers(1));
    stub_ = testing::NewStub(server_->address());
    ASSERT_EQ(testing::JoinAll(*stub_, 1)[0].generation(), 1u);
  }
  grpc::Status Set(const std::string& key, const std::string& value) {
    grpc::ClientContext context;
    KvSetRequest r;
    r.set_generation(1);
    r.set_key(key);
    r.set_value(value);
    KvSetResponse response;
    return stub_->KvSet(&context, r, &response);
  }
  grpc::Status Wait(std::vector<std::string> keys, int64_t timeout_ms) {
    grpc::ClientContext context;
    KvWaitRequest r;
    r.set_generation(1);
    for (const std::string& k : keys) r.add_keys(k);
    r.set_timeout_ms(timeout_ms);
    KvWaitResponse response;
    return stub_->KvWait(&context, r, &response);
  }
  Reply<KvAddResponse> Add(const std::string& key, int64_t delta) {
    grpc::ClientContext context;
    KvAddRequest r;
    r.set_generation(1);
    r.set_key(key);
    r.set_delta(delta);
    Reply<KvAddResponse> reply;
    reply.status = stub_->KvAdd(&context, r, &reply.response);
    return reply;
  }
  Reply<KvGetResponse> Get(const std::string& key, uint64_t generation = 1) {
    grpc::ClientContext context;
    KvGetRequest r;
    r.set_generation(generation);
    r.set_key(key);
    Reply<KvGetResponse> reply;
    reply.status = stub_->KvGet(&context, r, &reply.response);
    return reply;
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<Coordinator::Stub> stub_;
};

TEST_F(KvTest, SetOverwritesAndGetSaysWhetherFound) {
  EXPECT_FALSE(Get("g1/a").response.found());
  ASSERT_TRUE(Set("g1/a", "one").ok());
  ASSERT_TRUE(Set("g1/a", std::string("t\0o", 3)).ok());
  const Reply<KvGetResponse> got = Get("g1/a");
  ASSERT_TRUE(got.status.ok());
  EXPECT_TRUE(got.response.found());
  EXPECT_EQ(got.response.value(), std::string("t\0o", 3));
  const Reply<KvGetResponse> stale = Get("g1/a", 2);
  EXPECT_EQ(stale.status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_EQ(stale.status.error_message(), "stale generation 2, current is 1");
}

TEST_F(KvTest, WaitReturnsOnceEveryKeyIsSet) {
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(Set("x", "1").ok());
    EXPECT_TRUE(Set("y", "2").ok());
  });
  const Clock::time_point start = Clock::now();
  EXPECT_TRUE(Wait({"x", "y"}, 5000).ok());
  EXPECT_GE(SecondsSince(start), 0.09);
  EXPECT_LT(SecondsSince(start), 2);
  setter.join();
}

TEST_F(KvTest, WaitTimeoutNamesTheMissingKeys) {
  ASSERT_TRUE(Set("x", "1").ok());
  const Clock::time_point start = Clock::now();
  const grpc::Status s = Wait({"x", "rank/1", "rank/2"}, 200);
  EXPECT_GE(SecondsSince(start), 0.19);
  EXPECT_EQ(s.error_code(), grpc::DEADLINE_EXCEEDED);
  EXPECT_EQ(s.error_message(),
            "KvWait timed out after 0.2s: 2 of 3 keys missing: \"rank/1\", "
            "\"rank/2\"");
}

TEST_F(KvTest, WaitIsAbortedWhenTheJobStops) {
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grpc::ClientContext context;
    StopRequest r;
    r.set_reason("operator");
    StopResponse ignored;
    EXPECT_TRUE(stub_->Stop(&context, r, &ignored).ok());
  });
  const grpc::Status s = Wait({"never"}, 10000);
  stopper.join();
  EXPECT_EQ(s.error_code(), grpc::ABORTED);
  EXPECT_EQ(s.error_message(), "the job is STOPPED: operator");
}

TEST_F(KvTest, AddIsAtomicAndStartsFromZero) {
  EXPECT_EQ(Add("n", 5).response.value(), 5);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) EXPECT_TRUE(Add("n", 1).status.ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(Add("n", 0).response.value(), 205);
  EXPECT_EQ(Get("n").response.value(), "205");
  ASSERT_TRUE(Set("text", "abc").ok());
  EXPECT_EQ(Add("text", 1).status.error_code(), grpc::FAILED_PRECONDITION);
}

TEST_F(KvTest, ValuesLargerThanGrpcDefaultLimitAreAccepted) {
  const std::string big(8 << 20, 'v');
  ASSERT_TRUE(Set("big", big).ok());
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto stub = Coordinator::NewStub(grpc::CreateCustomChannel(
      server_->address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  KvGetRequest r;
  r.set_generation(1);
  r.set_key("big");
  KvGetResponse response;
  ASSERT_TRUE(stub->KvGet(&context, r, &response).ok());
  EXPECT_EQ(response.value().size(), big.size());
}

TEST_F(KvTest, ShutdownReleasesABlockedWait) {
  grpc::Status s;
  std::thread waiter([&] { s = Wait({"never"}, 60000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Clock::time_point start = Clock::now();
  server_->Shutdown();
  waiter.join();
  EXPECT_LT(SecondsSince(start), 2.0);
  EXPECT_FALSE(s.ok());
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name);
}

TEST(Report, WrittenWhenTheJobEndsWithTheTrainKeys) {
  const std::string path = TempPath("coordinator_report.json");
  auto server = testing::StartCoordinator(Workers(2), path);
  auto stub = testing::NewStub(server->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  for (int w = 0; w < 2; ++w) {
    grpc::ClientContext context;
    FinishRequest r;
    r.set_generation(1);
    r.set_worker_id(absl::StrCat("w", w));
    r.set_rank(joined[w].rank());
    r.set_ok(true);
    WorkerResult* result = r.mutable_result();
    result->set_steps(50);
    result->set_epochs(2);
    result->set_samples(100 * (joined[w].rank() + 1));
    result->set_samples_per_s(10);
    result->set_final_loss(0.25);
    result->set_test_accuracy(joined[w].rank() == 0 ? 0.985 : 0.5);
    result->set_test_loss(0.05);
    result->set_parameters(61706);
    result->set_model("lenet5");
    FinishResponse ignored;
    ASSERT_TRUE(stub->Finish(&context, r, &ignored).ok());
  }
  EXPECT_EQ(server->Wait(), SUCCEEDED);
  ASSERT_TRUE(server->report_status().ok());
  const absl::StatusOr<std::string> json = ReadFile(path);
  ASSERT_TRUE(json.ok()) << json.status();
  for (const char* key :
       {"job", "model", "parameters", "replicas", "threads", "steps", "epochs",
        "samples", "samples_per_s", "train_seconds", "eval_seconds",
        "setup_seconds", "final_loss", "test_accuracy", "test_loss",
        "epoch_results", "world_size", "state", "reason"}) {
    EXPECT_TRUE(Contains(*json, absl::StrCat("\"", key, "\": "))) << key;
  }
  for (const char* value :
       {"\"job\": \"test\"", "\"samples\": 300,", "\"samples_per_s\": 20,",
        "\"test_accuracy\": 0.985,", "\"world_size\": 2,",
        "\"state\": \"SUCCEEDED\"", "\"threads\": null,", "\"replicas\": 2,",
        "\"parameters\": 61706,", "\"epoch_results\": [],"}) {
    EXPECT_TRUE(Contains(*json, value)) << value << " in\n" << *json;
  }
}

}  // namespace
}  // namespace cohort
