// The heartbeat connection between a client and the coordinator, over real
// gRPC on loopback (client/keepalive.h): the coordinator accepts the
// connection's pings without calls, and a heartbeat made while the
// coordinator cannot be reached goes out as soon as it can.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "client/keepalive.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "server/test_util.h"

namespace cohort {
namespace {

// A port nothing listens on (free when this returns).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK_GE(fd, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t n = sizeof(a);
  CHECK_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n), 0);
  close(fd);
  return ntohs(a.sin_port);
}

ClusterSpec Cluster(int64_t heartbeat_ms) {
  ClusterSpec c;
  c.set_min_workers(1);
  c.set_max_workers(1);
  c.set_heartbeat_interval_ms(heartbeat_ms);
  c.set_heartbeat_misses(3);
  return c;
}

TEST(HeartbeatConnection, CoordinatorAcceptsPingsWithoutCalls) {
  std::unique_ptr<CoordinatorServer> server =
      testing::StartCoordinator(Cluster(200));
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      server->address(), grpc::InsecureChannelCredentials(),
      HeartbeatChannelArguments(absl::Milliseconds(200)));
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(5)));
  // Pings with no call in flight (gRPC sends a client's at most one a
  // second). A server that takes them for abuse answers the third with
  // GOAWAY "too_many_pings", and the channel leaves READY.
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  EXPECT_EQ(channel->GetState(/*try_to_connect=*/false), GRPC_CHANNEL_READY);
}

TEST(HeartbeatConnection, HeartbeatWaitsForTheCoordinatorToListen) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> client =
      CoordinatorClient::Create(address);
  ASSERT_TRUE(client.ok()) << client.status();
  // One heartbeat a second: each waits up to a second, while connection
  // attempts go out every 250 ms.
  (*client)->FollowHeartbeats(Cluster(1000));
  const absl::Time start = absl::Now();
  std::future<absl::StatusOr<HeartbeatResponse>> beat =
      std::async(std::launch::async,
                 [&client] { return (*client)->Heartbeat(WorkerProgress()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CoordinatorOptions options;
  options.job = testing::TestJob(Cluster(1000));
  options.listen = address;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::StatusOr<HeartbeatResponse> r = beat.get();
  // The coordinator answered (it refuses a client that never joined).
  EXPECT_NE(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

}  // namespace
}  // namespace cohort
