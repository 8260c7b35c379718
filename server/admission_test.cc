// Admission before a request is read, against real servers on 127.0.0.1:
//  - every method of the coordinator and of a shard answers a call with a
//    wrong token before the call has sent any message (the token is checked
//    before the body is read, server/gated_service.h); were the body read
//    first, such a call would run into its deadline;
//  - the health service answers a caller without the token before it has
//    sent its request (server/health_service.h), and reflection refuses it
//    (server/reflection_gate.h);
//  - the coordinator's blocking calls (Join, KvWait) are bounded per client
//    connection and in all, the excess refused at once naming the bound,
//    while heartbeats, which are never limited, go on; a flood over many
//    connections leaves the places kept for the job's workers.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "server/coordinator.h"
#include "server/ps/shard_server.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string TokenFile() {
  const char* d = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(d ? d : "/tmp", "/admission_token");
  std::ofstream(path) << "the-right-token\n";
  return path;
}

// Each channel its own connection (gRPC shares them between channels to
// one address by default), so that each is its own peer to the limiter.
std::shared_ptr<grpc::Channel> Connection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

// Opens a call to `method` with a wrong token and sends no message (nor
// closes its side): its status, which must come back at once.
grpc::Status CallWithoutABody(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& method) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer wrong-token");
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  void* tag;
  bool ok;
  grpc::Status status;
  call->StartCall(nullptr);
  cq.Next(&tag, &ok);
  call->Finish(&status, nullptr);
  cq.Next(&tag, &ok);
  return status;
}

void ExpectRefusedBeforeAnyMessage(const std::string& address,
                                   const std::string& service,
                                   int expected_methods) {
  const google::protobuf::ServiceDescriptor& s =
      *google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          service);
  ASSERT_EQ(s.method_count(), expected_methods) << s.full_name();
  const std::shared_ptr<grpc::Channel> channel = Connection(address);
  for (int i = 0; i < s.method_count(); ++i) {
    const std::string method =
        absl::StrCat("/", s.full_name(), "/", s.method(i)->name());
    const Clock::time_point start = Clock::now();
    const grpc::Status status = CallWithoutABody(channel, method);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << method << ": " << status.error_message();
    EXPECT_LT(SecondsSince(start), 2.0) << method;
  }
}

TEST(Admission, EveryCoordinatorMethodChecksTheTokenBeforeTheBody) {
  ClusterSpec cluster;
  cluster.set_min_workers(1);
  CoordinatorOptions o;
  o.job = testing::TestJob(cluster);
  o.security.token_file = TokenFile();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  ExpectRefusedBeforeAnyMessage((*server)->address(),
                                Coordinator::service_full_name(), 14);
}

TEST(Admission, EveryShardMethodChecksTheTokenBeforeTheBody) {
  ShardServerOptions o;
  o.job.mutable_optimizer()->set_kind(OptimizerSpec::SGD);
  o.job.mutable_ps()->set_consistency(SYNC);
  o.security.token_file = TokenFile();
  absl::StatusOr<std::unique_ptr<ShardServer>> server = ShardServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  ExpectRefusedBeforeAnyMessage((*server)->address(),
                                ParameterServer::service_full_name(), 4);
}

// Opens a grpc.health.v1.Health/Check call without the token and sends no
// message (nor closes its side): the answer, which must come at once, as
// the service answers such a caller without reading its request.
struct HealthAnswer {
  grpc::Status status;
  grpc::health::v1::HealthCheckResponse response;
};
HealthAnswer CheckWithoutABody(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, "/grpc.health.v1.Health/Check", &cq);
  void* tag;
  bool ok;
  call->StartCall(nullptr);
  cq.Next(&tag, &ok);
  grpc::ByteBuffer buffer;
  call->Read(&buffer, nullptr);
  cq.Next(&tag, &ok);
  const bool answered = ok;
  HealthAnswer answer;
  call->Finish(&answer.status, nullptr);
  cq.Next(&tag, &ok);
  std::vector<grpc::Slice> slices;
  if (answered && buffer.Dump(&slices).ok()) {
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    EXPECT_TRUE(answer.response.ParseFromString(bytes));
  }
  return answer;
}

grpc::Status CheckService(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& service, bool with_token) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  if (with_token)
    context.AddMetadata("authorization", "Bearer the-right-token");
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse ignored;
  return stub->Check(&context, request, &ignored);
}

// A one-worker job's coordinator that wants the token, with a separate
// --health-listen port.
absl::StatusOr<std::unique_ptr<CoordinatorServer>>
StartGuardedWithHealthPort() {
  ClusterSpec cluster;
  cluster.set_min_workers(1);
  CoordinatorOptions o;
  o.job = testing::TestJob(cluster);
  o.security.token_file = TokenFile();
  o.health_listen = "127.0.0.1:0";
  return CoordinatorServer::Start(o);
}

// A caller without the token is answered without its request being read,
// on the main port and on --health-listen's (a body would be buffered whole:
// server/health_service.h); one with the token has its request read.
TEST(Admission, HealthAnswersACallerWithoutTheTokenWithoutReadingItsBody) {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      StartGuardedWithHealthPort();
  ASSERT_TRUE(server.ok()) << server.status();
  for (const std::string& address :
       {(*server)->address(),
        absl::StrCat("127.0.0.1:", (*server)->health_port())}) {
    const Clock::time_point start = Clock::now();
    const HealthAnswer answer = CheckWithoutABody(Connection(address));
    EXPECT_TRUE(answer.status.ok())
        << address << ": " << answer.status.error_message();
    EXPECT_EQ(answer.response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING)
        << address;
    EXPECT_LT(SecondsSince(start), 2.0) << address;
  }
  const std::shared_ptr<grpc::Channel> main = Connection((*server)->address());
  EXPECT_EQ(CheckService(main, "no.such.Service", true).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(CheckService(main, "cohort.Coordinator", true).ok());
  // Unread, the request is taken for the whole server's.
  EXPECT_TRUE(CheckService(main, "no.such.Service", false).ok());
}

// gRPC's reflection service reads its requests whole: without the token it
// is refused before, and --health-listen's port refuses it to everyone.
TEST(Admission, ReflectionChecksTheTokenBeforeTheBody) {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      StartGuardedWithHealthPort();
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string method =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  Clock::time_point start = Clock::now();
  grpc::Status s = CallWithoutABody(Connection((*server)->address()), method);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << s.error_message();
  EXPECT_EQ(s.error_message(), "missing or wrong job token");
  EXPECT_LT(SecondsSince(start), 2.0);
  start = Clock::now();
  s = CallWithoutABody(
      Connection(absl::StrCat("127.0.0.1:", (*server)->health_port())), method);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED)
      << s.error_message();
  EXPECT_LT(SecondsSince(start), 2.0);
}

// A coordinator of a job of `min_workers` with its blocking calls bounded
// per peer and in all; null (and a failure) when it does not start.
std::unique_ptr<CoordinatorServer> StartWithLimits(int min_workers,
                                                   int per_peer, int total) {
  ClusterSpec cluster;
  cluster.set_min_workers(min_workers);
  cluster.set_heartbeat_interval_ms(10000);
  CoordinatorOptions o;
  o.job = testing::TestJob(cluster);
  o.max_blocking_calls_per_peer = per_peer;
  o.max_blocking_calls = total;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> s =
      CoordinatorServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

class BlockingLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartWithLimits(/*min_workers=*/1, /*per_peer=*/2, /*total=*/3);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    for (std::thread& t : waits_) t.join();
  }

  static grpc::Status Wait(Coordinator::Stub& stub, int64_t timeout_ms) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    KvWaitRequest r;
    r.set_generation(1);
    r.add_keys("go");
    r.set_timeout_ms(timeout_ms);
    KvWaitResponse ignored;
    return stub.KvWait(&context, r, &ignored);
  }
  // A KvWait that blocks until "go" is set (or the server shuts down).
  void StartWait(Coordinator::Stub* stub) {
    waits_.emplace_back([stub] { EXPECT_TRUE(Wait(*stub, 20000).ok()); });
  }
  // Time for the waits started to reach the server and be admitted.
  void Settle() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

  std::unique_ptr<CoordinatorServer> server_;
  std::vector<std::thread> waits_;
};

TEST_F(BlockingLimits, ExcessIsRefusedAtOnceNamingTheBoundHeartbeatsGoOn) {
  auto a = Coordinator::NewStub(Connection(server_->address()));
  auto b = Coordinator::NewStub(Connection(server_->address()));
  auto c = Coordinator::NewStub(Connection(server_->address()));
  // Join is limited too; it returns once the round of one is complete.
  const testing::Reply<JoinResponse> joined =
      testing::Join(*a, testing::MakeJoin("w0"));
  ASSERT_TRUE(joined.status.ok()) << joined.status.error_message();

  StartWait(a.get());
  StartWait(a.get());
  Settle();
  Clock::time_point start = Clock::now();
  grpc::Status refused = Wait(*a, 20000);
  EXPECT_LT(SecondsSince(start), 1.0);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              MatchesRegex("too many concurrent blocking calls \\(Join, "
                           "KvWait\\) from ipv4:127\\.0\\.0\\.1:[0-9]+: at "
                           "most 2 per client connection; retry later"));

  StartWait(b.get());
  Settle();
  start = Clock::now();
  refused = Wait(*c, 20000);
  EXPECT_LT(SecondsSince(start), 1.0);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("this server runs at most 3 at once from all clients"));
  const testing::Reply<JoinResponse> join_refused =
      testing::Join(*c, testing::MakeJoin("w1"));
  EXPECT_EQ(join_refused.status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Heartbeats are not limited, on the full connection or any other.
  for (Coordinator::Stub* stub : {a.get(), c.get()}) {
    const testing::Reply<HeartbeatResponse> hb =
        testing::Heartbeat(*stub, joined.response, "w0");
    EXPECT_TRUE(hb.status.ok()) << hb.status.error_message();
  }

  // The waits end, and their places are free again.
  grpc::ClientContext context;
  KvSetRequest set;
  set.set_generation(1);
  set.set_key("go");
  KvSetResponse ignored;
  ASSERT_TRUE(c->KvSet(&context, set, &ignored).ok());
  for (std::thread& t : waits_) t.join();
  waits_.clear();
  EXPECT_TRUE(Wait(*a, 1000).ok());
}

grpc::Status KvWaitFor(Coordinator::Stub& stub, uint64_t generation,
                       int64_t timeout_ms) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  KvWaitRequest r;
  r.set_generation(generation);
  r.add_keys("never");
  r.set_timeout_ms(timeout_ms);
  KvWaitResponse ignored;
  return stub.KvWait(&context, r, &ignored);
}

// A coordinator of a job of two whose total of blocking calls is 6 (3 of
// them kept for workers), and a flood of KvWaits over four connections.
class Flood : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartWithLimits(/*min_workers=*/2, /*per_peer=*/2, /*total=*/6);
    ASSERT_NE(server_, nullptr);
    for (int i = 0; i < 4; ++i) flood_.push_back(NewConnection());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    for (std::thread& t : waits_) t.join();
  }

  std::unique_ptr<Coordinator::Stub> NewConnection() {
    return Coordinator::NewStub(Connection(server_->address()));
  }
  // `per_connection` KvWaits of 3 s on every flood connection; counts the
  // refused ones.
  void Waits(uint64_t generation, int per_connection) {
    for (auto& stub : flood_) {
      for (int i = 0; i < per_connection; ++i) {
        waits_.emplace_back([this, stub = stub.get(), generation] {
          const grpc::Status s = KvWaitFor(*stub, generation, 3000);
          if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++refused_;
          }
        });
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::vector<std::unique_ptr<Coordinator::Stub>> flood_;
  std::vector<std::thread> waits_;
  std::atomic<int> refused_{0};
};

// The flood fills the ordinary calls' share of the total, not the places
// kept for workers: a forming job's workers still join, and the KV waits
// of a connection that joined are let in.
TEST_F(Flood, LeavesRoomForTheJobsWorkers) {
  Waits(0, 2);
  EXPECT_EQ(refused_.load(), 5);  // 3 let in, the others refused

  std::vector<std::unique_ptr<Coordinator::Stub>> workers;
  for (int w = 0; w < 2; ++w) workers.push_back(NewConnection());
  std::vector<testing::Reply<JoinResponse>> joined(2);
  std::vector<std::thread> joins;
  for (int w = 0; w < 2; ++w) {
    joins.emplace_back([&, w] {
      joined[w] =
          testing::Join(*workers[w], testing::MakeJoin(absl::StrCat("w", w)));
    });
  }
  for (std::thread& t : joins) t.join();
  for (const auto& j : joined) {
    ASSERT_TRUE(j.status.ok()) << j.status.error_message();
  }

  // The flood comes back for the new generation; a worker's KV wait is
  // still let in (it times out at the coordinator), another client's not.
  const uint64_t generation = joined[0].response.generation();
  Waits(generation, 1);
  const grpc::Status worker = KvWaitFor(*workers[0], generation, 200);
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << worker.error_message();
  const grpc::Status other = KvWaitFor(*NewConnection(), generation, 200);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(other.error_message(),
              HasSubstr("keeps 3 of them for joining workers"));
}

// A waiting call whose client went away gives its place back (the wait
// polls for cancellation), so a client that gives up is not held to it.
TEST_F(BlockingLimits, ACancelledWaitGivesItsPlaceBack) {
  auto a = Coordinator::NewStub(Connection(server_->address()));
  ASSERT_TRUE(testing::Join(*a, testing::MakeJoin("w0")).status.ok());
  auto wait_for = [&a](int64_t client_ms, int64_t server_ms) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(client_ms));
    KvWaitRequest r;
    r.set_generation(1);
    r.add_keys("never");
    r.set_timeout_ms(server_ms);
    KvWaitResponse ignored;
    return a->KvWait(&context, r, &ignored);
  };
  // Two give up after 300 ms (the client's deadline) ...
  std::vector<std::thread> first;
  for (int i = 0; i < 2; ++i) {
    first.emplace_back([&] {
      EXPECT_EQ(wait_for(300, 60000).error_code(),
                grpc::StatusCode::DEADLINE_EXCEEDED);
    });
  }
  for (std::thread& t : first) t.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // ... and two more are admitted: they time out at the server.
  std::vector<std::thread> second;
  for (int i = 0; i < 2; ++i) {
    second.emplace_back([&] {
      const grpc::Status s = wait_for(5000, 200);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
      EXPECT_THAT(s.error_message(), HasSubstr("KvWait timed out"));
    });
  }
  for (std::thread& t : second) t.join();
}

}  // namespace
}  // namespace cohort
