// A worker's Join against a coordinator too busy to take it (its blocking
// calls at their bound: RESOURCE_EXHAUSTED before the request is read) is
// retried with backoff until there is room or the connect timeout passes,
// against a real coordinator on 127.0.0.1 (client/coordinator_client.h).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "server/coordinator.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Each channel its own connection, so that each is its own peer.
std::unique_ptr<Coordinator::Stub> Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return Coordinator::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
}

// A job of three whose coordinator runs at most three blocking calls.
class JoinRetry : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterSpec cluster;
    cluster.set_min_workers(3);
    cluster.set_join_timeout_ms(20000);
    cluster.set_heartbeat_interval_ms(10000);
    CoordinatorOptions o;
    o.job = testing::TestJob(cluster);
    o.max_blocking_calls = 3;
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> s =
        CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    stubs_.push_back(Connect(server_->address()));  // w0's
    stubs_.push_back(Connect(server_->address()));  // another client's
    stubs_.push_back(Connect(server_->address()));  // w2's
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    for (std::thread& t : threads_) t.join();
  }

  // Fills the bound: w0's Join, waiting for the round, and two KvWaits of
  // another client that time out at the coordinator after `hold_ms`.
  void Fill(int64_t hold_ms) {
    threads_.emplace_back(
        [this] { w0_ = testing::Join(*stubs_[0], testing::MakeJoin("w0")); });
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this, hold_ms] {
        grpc::ClientContext context;
        KvWaitRequest r;
        r.add_keys("never");
        r.set_timeout_ms(hold_ms);
        KvWaitResponse ignored;
        stubs_[1]->KvWait(&context, r, &ignored);
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::vector<std::unique_ptr<Coordinator::Stub>> stubs_;
  std::vector<std::thread> threads_;
  testing::Reply<JoinResponse> w0_, w2_;
};

TEST_F(JoinRetry, ARefusedJoinIsRetriedUntilThereIsRoom) {
  Fill(1500);
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> client =
      CoordinatorClient::Create(server_->address());
  ASSERT_TRUE(client.ok()) << client.status();
  // The third worker comes once the waits have given their places back.
  threads_.emplace_back([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    w2_ = testing::Join(*stubs_[2], testing::MakeJoin("w2"));
  });
  const Clock::time_point start = Clock::now();
  absl::StatusOr<JoinResponse> w1 =
      (*client)->Join(testing::MakeJoin("w1"), absl::Seconds(15));
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_GT(SecondsSince(start), 1.0);  // refused at first
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  EXPECT_TRUE(w0_.status.ok()) << w0_.status.error_message();
  EXPECT_TRUE(w2_.status.ok()) << w2_.status.error_message();
  EXPECT_EQ(w1->generation(), w0_.response.generation());
}

TEST_F(JoinRetry, GivesUpAtTheConnectTimeoutSayingWhy) {
  Fill(20000);
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> client =
      CoordinatorClient::Create(server_->address());
  ASSERT_TRUE(client.ok()) << client.status();
  const Clock::time_point start = Clock::now();
  absl::StatusOr<JoinResponse> w1 =
      (*client)->Join(testing::MakeJoin("w1"), absl::Milliseconds(1500));
  const double took = SecondsSince(start);
  ASSERT_EQ(w1.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(w1.status().message(),
              HasSubstr("join refused at coordinator " + server_->address() +
                        ": still too busy after "));
  EXPECT_THAT(w1.status().message(),
              HasSubstr("in 1.5s (the connect timeout): too many concurrent "
                        "blocking calls (Join, KvWait): this server runs at "
                        "most 3 at once from all clients"));
  EXPECT_GT(took, 1.0);
  EXPECT_LT(took, 4.0);
}

// A full job's refusal is RESOURCE_EXHAUSTED too, but retrying cannot
// change it: it comes back at once.
TEST(JoinRefusal, AFullJobIsNotRetried) {
  ClusterSpec cluster;
  cluster.set_min_workers(1);
  cluster.set_max_workers(1);
  cluster.set_heartbeat_interval_ms(10000);
  std::unique_ptr<CoordinatorServer> server =
      testing::StartCoordinator(cluster);
  ASSERT_TRUE(
      testing::Join(*Connect(server->address()), testing::MakeJoin("w0"))
          .status.ok());
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> client =
      CoordinatorClient::Create(server->address());
  ASSERT_TRUE(client.ok()) << client.status();
  const Clock::time_point start = Clock::now();
  absl::StatusOr<JoinResponse> w1 =
      (*client)->Join(testing::MakeJoin("w1"), absl::Seconds(10));
  EXPECT_EQ(w1.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(w1.status().message(), HasSubstr("maximum of 1 workers"));
  EXPECT_LT(SecondsSince(start), 1.0);
}

}  // namespace
}  // namespace cohort
