// What stock gRPC tools and the operating system see of the coordinator:
// grpc.health.v1 status, server reflection, and a port that is taken.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

ClusterSpec Workers(int n) {
  ClusterSpec c;
  c.set_min_workers(n);
  return c;
}

TEST(Health, ServingWhileUpAndNotServingOnShutdown) {
  auto server = testing::StartCoordinator(Workers(1));
  auto channel = grpc::CreateChannel(server->address(),
                                     grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const char* service : {"", "cohort.Coordinator"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest r;
    r.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, r, &response).ok()) << service;
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest r;
  auto watch = health->Watch(&context, r);
  grpc::health::v1::HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  std::thread stopper([&] { server->Shutdown(); });
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  context.TryCancel();
  stopper.join();
}

// Lists services through gRPC server reflection, as grpcurl does. The
// reflection messages come from a descriptor set built by protoc (see BUILD
// on why they are not generated C++) and travel through a generic stub.
std::vector<std::string> ListServices(const std::string& address) {
  namespace pb = google::protobuf;
  const char* root = std::getenv("TEST_SRCDIR");
  const absl::StatusOr<std::string> desc = ReadFile(
      root ? absl::StrCat(root, "/cohort/server/reflection_descriptor.pb")
           : "server/reflection_descriptor.pb");
  pb::FileDescriptorSet set;
  if (!desc.ok() || !set.ParseFromString(*desc)) {
    ADD_FAILURE() << "no reflection descriptor set: " << desc.status();
    return {};
  }
  pb::DescriptorPool pool;
  for (const pb::FileDescriptorProto& file : set.file()) pool.BuildFile(file);
  const pb::Descriptor* req_type = pool.FindMessageTypeByName(
      "grpc.reflection.v1alpha.ServerReflectionRequest");
  const pb::Descriptor* resp_type = pool.FindMessageTypeByName(
      "grpc.reflection.v1alpha.ServerReflectionResponse");
  if (req_type == nullptr || resp_type == nullptr) return {};
  pb::DynamicMessageFactory factory;
  std::unique_ptr<pb::Message> request(factory.GetPrototype(req_type)->New());
  request->GetReflection()->SetString(
      request.get(), req_type->FindFieldByName("list_services"), "");
  grpc::GenericStub stub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &context,
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok = false;
  auto step = [&](auto&& op) {
    op();
    return cq.Next(&tag, &ok) && ok;
  };
  grpc::Slice slice(request->SerializeAsString());
  grpc::ByteBuffer out(&slice, 1), in;
  grpc::Status status;
  if (!step([&] { call->StartCall(nullptr); }) ||
      !step([&] { call->Write(out, nullptr); }) ||
      !step([&] { call->WritesDone(nullptr); }) ||
      !step([&] { call->Read(&in, nullptr); }) ||
      !step([&] { call->Finish(&status, nullptr); })) {
    return {};
  }
  std::vector<grpc::Slice> slices;
  in.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  std::unique_ptr<pb::Message> response(factory.GetPrototype(resp_type)->New());
  response->ParseFromString(bytes);
  const pb::Reflection* refl = response->GetReflection();
  const pb::Message& list = refl->GetMessage(
      *response, resp_type->FindFieldByName("list_services_response"));
  const pb::FieldDescriptor* services =
      list.GetDescriptor()->FindFieldByName("service");
  std::vector<std::string> names;
  for (int i = 0; i < list.GetReflection()->FieldSize(list, services); ++i) {
    const pb::Message& s =
        list.GetReflection()->GetRepeatedMessage(list, services, i);
    names.push_back(s.GetReflection()->GetString(
        s, s.GetDescriptor()->FindFieldByName("name")));
  }
  return names;
}

TEST(Reflection, ListsTheCoordinatorAndHealthServices) {
  auto server = testing::StartCoordinator(Workers(1));
  const std::vector<std::string> names = ListServices(server->address());
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("cohort.Coordinator"));
  EXPECT_TRUE(has("grpc.health.v1.Health"));
  EXPECT_TRUE(has("grpc.reflection.v1alpha.ServerReflection"));
}

absl::Status StartOn(const std::string& listen) {
  CoordinatorOptions options;
  options.job = testing::TestJob(Workers(1));
  options.listen = listen;
  return CoordinatorServer::Start(options).status();
}

TEST(Listen, PortInUseFailsQuicklyNamingTheAddress) {
  auto first = testing::StartCoordinator(Workers(1));
  const Clock::time_point start = Clock::now();
  const absl::Status s = StartOn(first->address());
  EXPECT_LT(SecondsSince(start), 2.0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), absl::StrCat("cannot listen on ", first->address(),
                                      ": address already in use"));
  // Also when something other than a coordinator holds the port.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  EXPECT_EQ(StartOn(taken).message(), absl::StrCat("cannot listen on ", taken,
                                                   ": address already in use"));
  close(fd);
}

}  // namespace
}  // namespace cohort
