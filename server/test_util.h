// Test helpers for the coordinator: start one on 127.0.0.1 port 0, build
// requests, and call it like a worker (real gRPC over loopback).
//
// The helpers own nothing beyond what they return; they are thread-safe,
// so tests run several "workers" as threads against one coordinator.
#ifndef COHORT_SERVER_TEST_UTIL_H_
#define COHORT_SERVER_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "proto/coordinator.grpc.pb.h"
#include "server/coordinator.h"

namespace cohort {
namespace testing {

// A job named "test" with seed 42 and the given cluster settings; a
// cluster without max_restarts gets 0 (a fixed world).
JobSpec TestJob(const ClusterSpec& cluster);

// Starts a coordinator on 127.0.0.1:0; CHECK-fails if it cannot.
std::unique_ptr<CoordinatorServer> StartCoordinator(
    const ClusterSpec& cluster, const std::string& report_path = "",
    bool serve_after_done = false);

std::unique_ptr<Coordinator::Stub> NewStub(const std::string& address);

// worker_id `id`, host "host-<id>", pid 1000 + the id's last digit.
JoinRequest MakeJoin(const std::string& id, int replicas = 1);

// A call's outcome, for EXPECTs on code and message.
template <typename T>
struct Reply {
  grpc::Status status;
  T response;
};

Reply<JoinResponse> Join(Coordinator::Stub& stub, const JoinRequest& request);
Reply<HeartbeatResponse> Heartbeat(Coordinator::Stub& stub,
                                   const JoinResponse& joined,
                                   const std::string& worker_id);
grpc::Status Finish(Coordinator::Stub& stub, const JoinResponse& joined,
                    const std::string& worker_id, bool ok,
                    const std::string& error = "");
StatusResponse GetStatus(Coordinator::Stub& stub);

// Joins `n` workers "w0".."w<n-1>", in that order, so worker i gets rank i
// (a round of exactly n must complete); returns their responses.
std::vector<JoinResponse> JoinAll(Coordinator::Stub& stub, int n);

}  // namespace testing
}  // namespace cohort

#endif  // COHORT_SERVER_TEST_UTIL_H_
