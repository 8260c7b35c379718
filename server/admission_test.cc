// Issue 16, defect 3, against real servers on 127.0.0.1: every method of
// the coordinator and of a shard answers a call with a wrong token before
// the call has sent any message (the token is checked before the body is
// read, server/gated_service.h); before, gRPC waited for the whole request
// and such a call ran into its deadline.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "server/coordinator.h"
#include "server/ps/shard_server.h"
#include "server/test_util.h"

namespace cohort {
namespace {

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
                                ParameterServer::service_full_name(), 3);
}

}  // namespace
}  // namespace cohort
