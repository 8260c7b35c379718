// The coordinator's HTTP side (--metrics-listen): /metrics, the dashboard,
// /api/status and /api/history against a real coordinator whose "workers"
// are gRPC calls from this test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/coordinator.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// GET `path` from 127.0.0.1:port; the whole response, or "" when the
// connection is refused.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n\r\n");
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buf[4096];
    pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, 5000) > 0) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

// The contents of array `name` in the history's JSON ("1,2,3").
std::string Array(const std::string& json, const std::string& name) {
  const std::string key = absl::StrCat("\"", name, "\":[");
  const size_t from = json.find(key);
  if (from == std::string::npos) return "";
  const size_t begin = from + key.size();
  return json.substr(begin, json.find(']', begin) - begin);
}

std::unique_ptr<CoordinatorServer> StartWithMetrics() {
  ClusterSpec cluster;
  cluster.set_min_workers(2);
  CoordinatorOptions o;
  o.job = testing::TestJob(cluster);
  o.listen = "127.0.0.1:0";
  o.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> c =
      CoordinatorServer::Start(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

void Progress(Coordinator::Stub& stub, const JoinResponse& joined,
              const std::string& id, int64_t step, double loss,
              int64_t finished_epoch, double accuracy) {
  grpc::ClientContext context;
  HeartbeatRequest r;
  r.set_generation(joined.generation());
  r.set_worker_id(id);
  r.set_rank(joined.rank());
  r.mutable_progress()->set_step(step);
  r.mutable_progress()->set_loss(loss);
  r.mutable_progress()->set_samples_per_s(100);
  r.mutable_progress()->set_finished_epoch(finished_epoch);
  r.mutable_progress()->set_finished_epoch_test_accuracy(accuracy);
  HeartbeatResponse response;
  ASSERT_TRUE(stub.Heartbeat(&context, r, &response).ok());
}

TEST(CoordinatorMetricsTest, ServesMetricsDashboardStatusAndHistory) {
  std::unique_ptr<CoordinatorServer> c = StartWithMetrics();
  ASSERT_NE(c, nullptr);
  const int port = c->metrics_port();
  ASSERT_GT(port, 0);
  EXPECT_THAT(HttpGet(port, "/metrics"),
              HasSubstr("\ncohort_job_state{state=\"FORMING\"} 1\n"));

  std::unique_ptr<Coordinator::Stub> stub = testing::NewStub(c->address());
  const std::vector<JoinResponse> joined = testing::JoinAll(*stub, 2);
  ASSERT_EQ(joined.size(), 2u);
  Progress(*stub, joined[0], "w0", 10, 0.5, 1, 0.75);
  Progress(*stub, joined[1], "w1", 12, 0.25, 1, 0.5);

  const std::string metrics = HttpGet(port, "/metrics");
  EXPECT_THAT(metrics, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(metrics, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(metrics, HasSubstr("\ncohort_job_state{state=\"RUNNING\"} 1\n"));
  EXPECT_THAT(metrics,
              HasSubstr("\ncohort_worker_step{rank=\"0\",host=\"host-w0\"} "
                        "10\n"));
  EXPECT_THAT(metrics,
              HasSubstr("\ncohort_worker_loss{rank=\"1\",host=\"host-w1\"} "
                        "0.25\n"));
  EXPECT_THAT(metrics, HasSubstr("\ncohort_job_samples_per_second 200\n"));

  const std::string status = HttpGet(port, "/api/status");
  EXPECT_THAT(status, HasSubstr("Content-Type: application/json"));
  EXPECT_THAT(status, HasSubstr("\"state\":\"RUNNING\""));
  EXPECT_THAT(status, HasSubstr("\"rank\":0,"));  // zeros are printed
  EXPECT_THAT(status, HasSubstr("\"host\":\"host-w1\""));

  const std::string page = HttpGet(port, "/");
  EXPECT_THAT(page, HasSubstr("Content-Type: text/html"));
  EXPECT_THAT(page, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(HttpGet(port, "/nope"), StartsWith("HTTP/1.1 404 "));

  // The sampler records once a second: the mean loss of both workers, the
  // newest step, and epoch 1's accuracy from rank 0 (the lowest rank).
  // (A sample taken between the two heartbeats has only rank 0's.)
  std::string history, steps, losses;
  for (absl::Time until = absl::Now() + absl::Seconds(10); absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(100))) {
    history = HttpGet(port, "/api/history");
    steps = Array(history, "step");
    losses = Array(history, "loss");
    if (absl::EndsWith(steps, "12")) break;
  }
  EXPECT_TRUE(absl::EndsWith(steps, "12")) << history;
  EXPECT_TRUE(absl::EndsWith(losses, "0.375")) << history;
  EXPECT_THAT(history, HasSubstr("{\"epoch\":1,\"test_accuracy\":0.75,"));

  // A finished worker's results add the epochs its heartbeats missed.
  {
    grpc::ClientContext context;
    FinishRequest f;
    f.set_generation(joined[1].generation());
    f.set_worker_id("w1");
    f.set_rank(1);
    f.set_ok(true);
    EpochSummary* e = f.mutable_result()->add_epoch_results();
    e->set_epoch(2);
    e->set_test_accuracy(0.875);
    FinishResponse response;
    ASSERT_TRUE(stub->Finish(&context, f, &response).ok());
  }
  EXPECT_THAT(HttpGet(port, "/api/history"),
              HasSubstr("{\"epoch\":2,\"test_accuracy\":0.875,"));

  c->Shutdown();
  EXPECT_EQ(HttpGet(port, "/metrics"), "");  // no longer listening
}

TEST(CoordinatorMetricsTest, ABusyMetricsPortFailsTheStart) {
  std::unique_ptr<CoordinatorServer> first = StartWithMetrics();
  ASSERT_NE(first, nullptr);
  ClusterSpec cluster;
  CoordinatorOptions o;
  o.job = testing::TestJob(cluster);
  o.metrics_listen = absl::StrCat("127.0.0.1:", first->metrics_port());
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second =
      CoordinatorServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(),
            absl::StrCat("cannot listen on 127.0.0.1:", first->metrics_port(),
                         " (--metrics-listen): address already in use"));
}

TEST(CoordinatorMetricsTest, WithoutTheFlagNothingListens) {
  std::unique_ptr<CoordinatorServer> c =
      testing::StartCoordinator(ClusterSpec());
  EXPECT_EQ(c->metrics_port(), 0);
}

}  // namespace
}  // namespace cohort
