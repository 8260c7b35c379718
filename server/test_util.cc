#include "server/test_util.h"

#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort {
namespace testing {

JobSpec TestJob(const ClusterSpec& cluster) {
  JobSpec job;
  job.set_name("test");
  job.mutable_model()->set_zoo("lenet5");
  job.set_batch_size(32);
  job.set_epochs(1);
  job.set_seed(42);
  *job.mutable_cluster() = cluster;
  // The coordinator fills cluster defaults as the spec loader does
  // (common/spec.h), where an unset max_restarts means 3; these tests were
  // written for a fixed world unless they ask for restarts.
  if (!cluster.has_max_restarts()) job.mutable_cluster()->set_max_restarts(0);
  return job;
}

std::unique_ptr<CoordinatorServer> StartCoordinator(
    const ClusterSpec& cluster, const std::string& report_path,
    bool serve_after_done) {
  CoordinatorOptions options;
  options.job = TestJob(cluster);
  options.report_path = report_path;
  options.serve_after_done = serve_after_done;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(options);
  CHECK(server.ok()) << server.status().ToString();
  return *std::move(server);
}

std::unique_ptr<Coordinator::Stub> NewStub(const std::string& address) {
  return Coordinator::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

JoinRequest MakeJoin(const std::string& id, int replicas) {
  JoinRequest r;
  r.set_protocol_version(Protocol::CURRENT);
  r.set_worker_id(id);
  r.set_host(absl::StrCat("host-", id));
  r.set_pid(1000 + (id.back() - '0'));
  r.set_replicas(replicas);
  r.set_address("127.0.0.1");
  return r;
}

Reply<JoinResponse> Join(Coordinator::Stub& stub, const JoinRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  Reply<JoinResponse> reply;
  reply.status = stub.Join(&context, request, &reply.response);
  return reply;
}

Reply<HeartbeatResponse> Heartbeat(Coordinator::Stub& stub,
                                   const JoinResponse& joined,
                                   const std::string& worker_id) {
  grpc::ClientContext context;
  HeartbeatRequest request;
  request.set_generation(joined.generation());
  request.set_worker_id(worker_id);
  request.set_rank(joined.rank());
  Reply<HeartbeatResponse> reply;
  reply.status = stub.Heartbeat(&context, request, &reply.response);
  return reply;
}

grpc::Status Finish(Coordinator::Stub& stub, const JoinResponse& joined,
                    const std::string& worker_id, bool ok,
                    const std::string& error) {
  grpc::ClientContext context;
  FinishRequest request;
  request.set_generation(joined.generation());
  request.set_worker_id(worker_id);
  request.set_rank(joined.rank());
  request.set_ok(ok);
  request.set_error(error);
  request.mutable_result()->set_test_accuracy(-1);
  request.mutable_result()->set_test_loss(-1);
  FinishResponse response;
  return stub.Finish(&context, request, &response);
}

StatusResponse GetStatus(Coordinator::Stub& stub) {
  grpc::ClientContext context;
  StatusResponse response;
  const grpc::Status s = stub.GetStatus(&context, StatusRequest(), &response);
  CHECK(s.ok()) << s.error_message();
  return response;
}

std::vector<JoinResponse> JoinAll(Coordinator::Stub& stub, int n) {
  std::vector<Reply<JoinResponse>> replies(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back(
        [&, i] { replies[i] = Join(stub, MakeJoin(absl::StrCat("w", i))); });
    // In order, so that worker i gets rank i.
    const auto start = std::chrono::steady_clock::now();
    while (i + 1 < n && GetStatus(stub).workers_size() < i + 1) {
      CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
          << "worker " << i << " never showed up in the status";
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  for (std::thread& t : threads) t.join();
  std::vector<JoinResponse> out;
  for (Reply<JoinResponse>& r : replies) {
    CHECK(r.status.ok()) << r.status.error_message();
    out.push_back(r.response);
  }
  return out;
}

}  // namespace testing
}  // namespace cohort
