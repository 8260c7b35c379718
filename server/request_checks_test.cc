// Every out-of-range RPC field is INVALID_ARGUMENT naming the field and the
// value (through real gRPC), stale or foreign callers are
// FAILED_PRECONDITION, and bad cluster settings and listen addresses are
// refused before anything starts.
#include "server/request_checks.h"

#include <cmath>
#include <functional>

#include "common/listen.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "server/test_util.h"

namespace cohort {
namespace {

struct Case {
  std::string name;
  std::function<grpc::Status(Coordinator::Stub&)> call;
  grpc::StatusCode code;
  std::string message;  // expected substring
};

template <typename Req, typename Resp>
using Method = grpc::Status (Coordinator::Stub::*)(grpc::ClientContext*,
                                                   const Req&, Resp*);

// A call of `method` with a valid request (generation 1, worker "w0" of
// rank 0) that `edit` then spoils.
template <typename Req, typename Resp>
std::function<grpc::Status(Coordinator::Stub&)> Call(
    Method<Req, Resp> method, std::function<void(Req*)> edit) {
  return [method, edit](Coordinator::Stub& stub) {
    Req r;
    if constexpr (std::is_same_v<Req, JoinRequest>) {
      r = testing::MakeJoin("w5");
    } else if constexpr (!std::is_same_v<Req, StopRequest>) {
      r.set_generation(1);
    }
    if constexpr (std::is_same_v<Req, HeartbeatRequest> ||
                  std::is_same_v<Req, FinishRequest>) {
      r.set_worker_id("w0");
    }
    if constexpr (std::is_same_v<Req, KvWaitRequest>) {
      r.add_keys("k");
    } else if constexpr (std::is_same_v<Req, KvSetRequest> ||
                         std::is_same_v<Req, KvGetRequest> ||
                         std::is_same_v<Req, KvAddRequest>) {
      r.set_key("k");
    }
    edit(&r);
    grpc::ClientContext context;
    Resp response;
    return (stub.*method)(&context, r, &response);
  };
}

using S = Coordinator::Stub;
using JR = JoinRequest;
using HR = HeartbeatRequest;
using FR = FinishRequest;
const grpc::StatusCode kInvalid = grpc::INVALID_ARGUMENT;
const grpc::StatusCode kPrecondition = grpc::FAILED_PRECONDITION;

std::vector<Case> JoinAndHeartbeatCases() {
  const Method<JR, JoinResponse> join = &S::Join;
  const Method<HR, HeartbeatResponse> beat = &S::Heartbeat;
  return {
      {"empty worker_id", Call(join, {[](JR* r) { r->set_worker_id(""); }}),
       kInvalid, "JoinRequest.worker_id must be non-empty, got \"\""},
      {"long worker_id",
       Call(join, {[](JR* r) { r->set_worker_id(std::string(257, 'x')); }}),
       kInvalid,
       "JoinRequest.worker_id must be at most 256 bytes, got 257 bytes"},
      {"empty host", Call(join, {[](JR* r) { r->set_host(""); }}), kInvalid,
       "JoinRequest.host must be non-empty"},
      {"long host",
       Call(join, {[](JR* r) { r->set_host(std::string(300, 'h')); }}),
       kInvalid, "JoinRequest.host must be at most 256 bytes, got 300"},
      {"empty address", Call(join, {[](JR* r) { r->set_address(""); }}),
       kInvalid, "JoinRequest.address must be non-empty"},
      {"address with a space",
       Call(join, {[](JR* r) { r->set_address("10.0.0.1 x"); }}), kInvalid,
       "JoinRequest.address must be a host name or an IP address, got "
       "\"10.0.0.1 x\""},
      {"negative pid", Call(join, {[](JR* r) { r->set_pid(-3); }}), kInvalid,
       "JoinRequest.pid must be >= 0, got -3"},
      {"zero replicas", Call(join, {[](JR* r) { r->set_replicas(0); }}),
       kInvalid, "JoinRequest.replicas must be in [1, 1024], got 0"},
      {"many replicas", Call(join, {[](JR* r) { r->set_replicas(1025); }}),
       kInvalid, "JoinRequest.replicas must be in [1, 1024], got 1025"},
      {"heartbeat worker_id", Call(beat, {[](HR* r) { r->set_worker_id(""); }}),
       kInvalid, "HeartbeatRequest.worker_id must be non-empty"},
      {"heartbeat rank -1", Call(beat, {[](HR* r) { r->set_rank(-1); }}),
       kInvalid, "HeartbeatRequest.rank must be >= 0, got -1"},
      {"heartbeat rank 2", Call(beat, {[](HR* r) { r->set_rank(2); }}),
       kInvalid, "HeartbeatRequest.rank must be in [0, 2) (world size), got 2"},
      {"step", Call(beat, {[](HR* r) { r->mutable_progress()->set_step(-1); }}),
       kInvalid, "HeartbeatRequest.progress.step must be >= 0, got -1"},
      {"epoch",
       Call(beat, {[](HR* r) { r->mutable_progress()->set_epoch(-2); }}),
       kInvalid, "HeartbeatRequest.progress.epoch must be >= 0, got -2"},
      {"samples_per_s", Call(beat, {[](HR* r) {
                               r->mutable_progress()->set_samples_per_s(NAN);
                             }}),
       kInvalid,
       "HeartbeatRequest.progress.samples_per_s must be finite and >= 0, "
       "got nan"},
      {"loss", Call(beat, {[](HR* r) { r->mutable_progress()->set_loss(-1); }}),
       kInvalid, "HeartbeatRequest.progress.loss must be >= 0"},
      {"compute_s",
       Call(beat, {[](HR* r) {
              r->mutable_progress()->mutable_times()->set_compute_s(INFINITY);
            }}),
       kInvalid,
       "HeartbeatRequest.progress.times.compute_s must be finite and >= 0, "
       "got inf"},
      {"bytes_allreduced",
       Call(beat,
            {[](HR* r) { r->mutable_progress()->set_bytes_allreduced(-5); }}),
       kInvalid, "HeartbeatRequest.progress.bytes_allreduced must be >= 0"},
      {"busbw",
       Call(beat, {[](HR* r) { r->mutable_progress()->set_busbw_gbps(-1); }}),
       kInvalid, "HeartbeatRequest.progress.busbw_gbps must be finite"},
  };
}

std::vector<Case> KvCases() {
  const Method<KvSetRequest, KvSetResponse> set = &S::KvSet;
  const Method<KvGetRequest, KvGetResponse> get = &S::KvGet;
  const Method<KvWaitRequest, KvWaitResponse> wait = &S::KvWait;
  const Method<KvAddRequest, KvAddResponse> add = &S::KvAdd;
  return {
      {"set empty key", Call(set, {[](KvSetRequest* r) { r->set_key(""); }}),
       kInvalid, "KvSetRequest.key must be non-empty"},
      {"set long key",
       Call(set, {[](KvSetRequest* r) { r->set_key(std::string(1025, 'k')); }}),
       kInvalid, "KvSetRequest.key must be at most 1024 bytes, got 1025"},
      {"set huge value",
       Call(set, {[](KvSetRequest* r) {
              r->set_value(std::string(kMaxValueBytes + 1, 'v'));
            }}),
       kInvalid, "KvSetRequest.value must be at most 67108864 bytes"},
      {"get empty key", Call(get, {[](KvGetRequest* r) { r->set_key(""); }}),
       kInvalid, "KvGetRequest.key must be non-empty"},
      {"wait too many keys", Call(wait, {[](KvWaitRequest* r) {
                                    for (int i = 0; i < 1024; ++i)
                                      r->add_keys("k");
                                  }}),
       kInvalid, "KvWaitRequest.keys must be at most 1024 keys, got 1025"},
      {"wait empty key",
       Call(wait, {[](KvWaitRequest* r) { r->add_keys(""); }}), kInvalid,
       "KvWaitRequest.keys[1] must be non-empty"},
      {"wait negative timeout",
       Call(wait, {[](KvWaitRequest* r) { r->set_timeout_ms(-1); }}), kInvalid,
       "KvWaitRequest.timeout_ms must be in [0, 600000], got -1"},
      {"wait long timeout",
       Call(wait, {[](KvWaitRequest* r) { r->set_timeout_ms(600001); }}),
       kInvalid, "got 600001"},
      {"add empty key", Call(add, {[](KvAddRequest* r) { r->set_key(""); }}),
       kInvalid, "KvAddRequest.key must be non-empty"},
  };
}

std::vector<Case> EpochFinishStopCases() {
  const Method<BeginEpochRequest, BeginEpochResponse> epoch = &S::BeginEpoch;
  const Method<FR, FinishResponse> finish = &S::Finish;
  const Method<StopRequest, StopResponse> stop = &S::Stop;
  return {
      {"epoch -1",
       Call(epoch, {[](BeginEpochRequest* r) { r->set_epoch(-1); }}), kInvalid,
       "BeginEpochRequest.epoch must be >= 0, got -1"},
      {"epoch rank 7",
       Call(epoch, {[](BeginEpochRequest* r) { r->set_rank(7); }}), kInvalid,
       "BeginEpochRequest.rank must be in [0, 2) (world size), got 7"},
      {"finish worker_id", Call(finish, {[](FR* r) { r->set_worker_id(""); }}),
       kInvalid, "FinishRequest.worker_id must be non-empty"},
      {"finish error", Call(finish, {[](FR* r) {
                              r->set_error(std::string(kMaxTextBytes + 1, 'e'));
                            }}),
       kInvalid, "FinishRequest.error must be at most 65536 bytes"},
      {"finish steps",
       Call(finish, {[](FR* r) { r->mutable_result()->set_steps(-1); }}),
       kInvalid, "FinishRequest.result.steps must be >= 0, got -1"},
      {"finish final_lr",
       Call(finish, {[](FR* r) { r->mutable_result()->set_final_lr(-0.5); }}),
       kInvalid,
       "FinishRequest.result.final_lr must be finite and >= 0, got -0.5"},
      {"finish best_step",
       Call(finish, {[](FR* r) { r->mutable_result()->set_best_step(-2); }}),
       kInvalid,
       "FinishRequest.result.best_step must be >= -1 (-1: none), got -2"},
      {"finish accuracy", Call(finish, {[](FR* r) {
                                 r->mutable_result()->set_test_accuracy(1.5);
                               }}),
       kInvalid,
       "FinishRequest.result.test_accuracy must be -1 (not evaluated) or in "
       "[0, 1], got 1.5"},
      {"finish samples_per_s",
       Call(finish,
            {[](FR* r) { r->mutable_result()->set_samples_per_s(-1); }}),
       kInvalid, "FinishRequest.result.samples_per_s must be finite and >= 0"},
      {"finish model",
       Call(finish, {[](FR* r) {
              r->mutable_result()->set_model(std::string(257, 'm'));
            }}),
       kInvalid, "FinishRequest.result.model must be at most 256 bytes"},
      {"stop reason", Call(stop, {[](StopRequest* r) {
                             r->set_reason(std::string(kMaxTextBytes + 1, 'r'));
                           }}),
       kInvalid, "StopRequest.reason must be at most 65536 bytes"},
  };
}

std::vector<Case> CallerCases() {
  const Method<HR, HeartbeatResponse> beat = &S::Heartbeat;
  const Method<FR, FinishResponse> finish = &S::Finish;
  const Method<KvSetRequest, KvSetResponse> set = &S::KvSet;
  const Method<BeginEpochRequest, BeginEpochResponse> epoch = &S::BeginEpoch;
  return {
      {"stale heartbeat", Call(beat, {[](HR* r) { r->set_generation(2); }}),
       kPrecondition, "stale generation 2, current is 1"},
      {"stale finish", Call(finish, {[](FR* r) { r->set_generation(0); }}),
       kPrecondition, "stale generation 0, current is 1"},
      {"stale kv", Call(set, {[](KvSetRequest* r) { r->set_generation(3); }}),
       kPrecondition, "stale generation 3, current is 1"},
      {"stale epoch",
       Call(epoch, {[](BeginEpochRequest* r) { r->set_generation(9); }}),
       kPrecondition, "stale generation 9, current is 1"},
      {"unknown worker", Call(beat, {[](HR* r) { r->set_worker_id("ghost"); }}),
       kPrecondition, "worker_id \"ghost\" is not a member of generation 1"},
      {"rank mismatch", Call(beat, {[](HR* r) { r->set_rank(1); }}),
       kPrecondition, "worker_id \"w0\" has rank 0 in generation 1, not 1"},
  };
}

class RequestChecks : public ::testing::Test {
 protected:
  void Check(const std::vector<Case>& cases) {
    ClusterSpec cluster;
    cluster.set_min_workers(2);
    // Nobody sends heartbeats here, and the 64 MiB requests can take
    // seconds on a loaded machine: the default 3 s would fail the job.
    cluster.set_heartbeat_interval_ms(60000);
    auto server = testing::StartCoordinator(cluster);
    auto stub = testing::NewStub(server->address());
    const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
    ASSERT_EQ(joined[0].rank(), 0);  // Call() assumes w0 has rank 0
    for (const Case& c : cases) {
      const grpc::Status s = c.call(*stub);
      EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
      EXPECT_NE(s.error_message().find(c.message), std::string::npos)
          << c.name << ": got \"" << s.error_message() << "\", expected \""
          << c.message << "\"";
    }
    EXPECT_EQ(testing::GetStatus(*stub).state(), RUNNING);
  }
};

TEST_F(RequestChecks, JoinAndHeartbeatFields) {
  Check(JoinAndHeartbeatCases());
}
TEST_F(RequestChecks, KvFields) { Check(KvCases()); }
TEST_F(RequestChecks, EpochFinishAndStopFields) {
  Check(EpochFinishStopCases());
}
TEST_F(RequestChecks, StaleAndForeignCallers) { Check(CallerCases()); }

TEST(EarlyCalls, AreRefusedBeforeTheJobForms) {
  ClusterSpec cluster;
  cluster.set_min_workers(2);
  auto server = testing::StartCoordinator(cluster);
  auto stub = testing::NewStub(server->address());
  JoinResponse none;
  none.set_generation(1);
  const testing::Reply<HeartbeatResponse> beat =
      testing::Heartbeat(*stub, none, "w0");
  EXPECT_EQ(beat.status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_EQ(beat.status.error_message(),
            "generation 1 does not exist: the job is still forming");
}

TEST(ClusterSpecCheck, DefaultsAndRanges) {
  ClusterSpec c;
  FillClusterDefaults(&c);
  EXPECT_TRUE(CheckClusterSpec(c).ok());
  EXPECT_EQ(c.min_workers(), 1);
  EXPECT_EQ(c.max_workers(), 1);
  EXPECT_EQ(c.last_call_ms(), 2000);
  EXPECT_EQ(c.join_timeout_ms(), 60000);
  EXPECT_EQ(c.collective_timeout_ms(), 30000);
  c.set_min_workers(3);
  EXPECT_EQ(CheckClusterSpec(c).message(),
            "job.cluster.max_workers must be in [min_workers (3), 4096], got "
            "1");
  c.set_max_workers(3);
  c.set_heartbeat_misses(-1);
  EXPECT_EQ(CheckClusterSpec(c).message(),
            "job.cluster.heartbeat_misses must be > 0, got -1");
  CoordinatorOptions options;
  options.job = testing::TestJob(c);
  EXPECT_EQ(CoordinatorServer::Start(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ListenAddressCheck, ParsesHostAndPort) {
  absl::StatusOr<ListenAddress> a = ParseListenAddress("[::1]:7000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "[::1]");
  EXPECT_EQ(a->port, 7000);
  EXPECT_EQ(ParseListenAddress("localhost").status().message(),
            "listen address \"localhost\" is not HOST:PORT: no port");
  EXPECT_EQ(ParseListenAddress("h:99999").status().message(),
            "listen address \"h:99999\" is not HOST:PORT: the port must be a "
            "number in [0, 65535]");
  EXPECT_FALSE(ParseListenAddress(":7000").ok());
  EXPECT_FALSE(ParseListenAddress("::1:7000").ok());
  EXPECT_FALSE(ParseListenAddress("h:-1").ok());
  CoordinatorOptions options;
  options.job = testing::TestJob(ClusterSpec());
  options.listen = "no-such-host.invalid:7000";
  const absl::Status s = CoordinatorServer::Start(options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("cannot listen on no-such-host.invalid:7000"),
            std::string::npos)
      << s;
}

TEST(AdvertisedAddressCheck, LoopbackOnlyFromTheCoordinatorsOwnHost) {
  // From another host, a loopback address is refused, naming --host.
  for (const char* a : {"127.0.0.1", "127.0.1.1", "::1", "[::1]"}) {
    const absl::Status s =
        CheckAdvertisedAddress("the worker", a, "ipv4:10.77.0.11:41000");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << a;
    EXPECT_NE(s.message().find("--host"), std::string::npos) << s;
    EXPECT_NE(s.message().find("10.77.0.11"), std::string::npos) << s;
  }
  // From loopback, or an address that is not loopback, passes.
  EXPECT_TRUE(
      CheckAdvertisedAddress("w", "127.0.0.1", "ipv4:127.0.0.1:4100").ok());
  EXPECT_TRUE(CheckAdvertisedAddress("w", "::1", "ipv6:[::1]:4100").ok());
  EXPECT_TRUE(
      CheckAdvertisedAddress("w", "10.77.0.11", "ipv4:10.77.0.11:1").ok());
  EXPECT_TRUE(
      CheckAdvertisedAddress("w", "fd77::11", "ipv6:[fd77::11]:1").ok());
}

TEST(AdvertisedAddressCheck, ShardAddressesBracketIpv6) {
  RegisterShardRequest r;
  r.set_protocol_version(Protocol::CURRENT);
  r.set_shard_id("s");
  r.set_host("h");
  r.set_address("fd77::13:29500");
  const absl::Status s = CheckRegisterShardRequest(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("IPv6 host in brackets"), std::string::npos) << s;
  r.set_address("[fd77::13]:29500");
  EXPECT_TRUE(CheckRegisterShardRequest(r).ok());
}

}  // namespace
}  // namespace cohort
