#include "common/prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

TEST(PrometheusTextTest, GroupsEachFamilyWhateverTheOrderOfSamples) {
  PrometheusText t;
  t.Declare("cohort_worker_step", PrometheusText::Type::kGauge, "Step.");
  t.Declare("cohort_worker_bytes_total", PrometheusText::Type::kCounter,
            "Bytes.");
  for (int rank = 0; rank < 2; ++rank) {
    const PrometheusLabels l = {{"rank", std::to_string(rank)}};
    t.Add("cohort_worker_step", l, 10 + rank);
    t.Add("cohort_worker_bytes_total", l, 1000 * (rank + 1));
  }
  t.Gauge("cohort_uptime_seconds", "Uptime.", 1.5);
  EXPECT_EQ(t.Render(),
            "# HELP cohort_worker_step Step.\n"
            "# TYPE cohort_worker_step gauge\n"
            "cohort_worker_step{rank=\"0\"} 10\n"
            "cohort_worker_step{rank=\"1\"} 11\n"
            "# HELP cohort_worker_bytes_total Bytes.\n"
            "# TYPE cohort_worker_bytes_total counter\n"
            "cohort_worker_bytes_total{rank=\"0\"} 1000\n"
            "cohort_worker_bytes_total{rank=\"1\"} 2000\n"
            "# HELP cohort_uptime_seconds Uptime.\n"
            "# TYPE cohort_uptime_seconds gauge\n"
            "cohort_uptime_seconds 1.5\n");
}

TEST(PrometheusTextTest, EscapesLabelValuesAndHelp) {
  PrometheusText t;
  t.Declare("m", PrometheusText::Type::kUntyped, "a \\ b\nc \"d\"");
  t.Add("m", {{"host", "a\"b\\c\nd"}, {"x", ""}}, 1);
  EXPECT_EQ(t.Render(),
            "# HELP m a \\\\ b\\nc \"d\"\n"
            "# TYPE m untyped\n"
            "m{host=\"a\\\"b\\\\c\\nd\",x=\"\"} 1\n");
}

TEST(PrometheusTextTest, DropsDuplicateLabelSetsAndEmptyFamilies) {
  PrometheusText t;
  t.Declare("empty", PrometheusText::Type::kGauge, "none");
  t.Declare("m", PrometheusText::Type::kGauge, "h");
  EXPECT_TRUE(t.Add("m", {{"rank", "0"}}, 1));
  EXPECT_FALSE(t.Add("m", {{"rank", "0"}}, 2));
  EXPECT_TRUE(t.Add("m", {{"rank", "1"}}, 3));
  EXPECT_EQ(t.Render(),
            "# HELP m h\n# TYPE m gauge\nm{rank=\"0\"} 1\nm{rank=\"1\"} 3\n");
}

TEST(PrometheusTextTest, WritesValuesExactly) {
  EXPECT_EQ(PrometheusValue(0), "0");
  EXPECT_EQ(PrometheusValue(-3), "-3");
  EXPECT_EQ(PrometheusValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(PrometheusValue(0.1), "0.1");
  EXPECT_EQ(PrometheusValue(1e-9), "1e-09");
  EXPECT_EQ(std::stod(PrometheusValue(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(PrometheusValue(1e300), "1e+300");
  EXPECT_EQ(PrometheusValue(std::nan("")), "NaN");
  EXPECT_EQ(PrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(PrometheusTextDeathTest, UndeclaredOrMalformedNamesAreBugs) {
  PrometheusText t;
  EXPECT_DEATH(t.Add("nope", 1), "not declared");
  EXPECT_DEATH(t.Declare("9bad", PrometheusText::Type::kGauge, ""),
               "bad metric name");
  t.Declare("ok", PrometheusText::Type::kGauge, "");
  EXPECT_DEATH(t.Declare("ok", PrometheusText::Type::kGauge, ""), "twice");
  EXPECT_DEATH(t.Add("ok", {{"__x", "1"}}, 1), "bad label name");
}

TEST(ServeMetricsTest, AnswersScrapesWithThePrometheusContentType) {
  int renders = 0;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      ServeMetrics("127.0.0.1:0", "--metrics-listen", [&renders] {
        ++renders;
        return std::string("# HELP x y\n# TYPE x gauge\nx 1\n");
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons((*server)->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0),
            static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[1024];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
    response.append(buf, n);
  }
  close(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain; version=0.0.4; "
                                  "charset=utf-8\r\n"));
  EXPECT_THAT(response, HasSubstr("\r\n\r\n# HELP x y\n# TYPE x gauge\nx 1\n"));
  (*server)->Shutdown();
  EXPECT_EQ(renders, 1);
}

}  // namespace
}  // namespace cohort
