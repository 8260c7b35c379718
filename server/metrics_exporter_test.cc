#include "server/metrics_exporter.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/prometheus_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dashboard.h"
#include "server/metrics_history.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WorkerStatus Worker(int rank, const std::string& host, int64_t step,
                    double loss) {
  WorkerStatus w;
  w.set_rank(rank);
  w.set_host(host);
  w.set_heartbeat_age_s(0.5);
  w.set_busy_vs_median(1.0);
  WorkerProgress* p = w.mutable_progress();
  p->set_step(step);
  p->set_epoch(1);
  p->set_loss(loss);
  p->set_samples_per_s(100 * (rank + 1));
  p->mutable_times()->set_data_s(0.001);
  p->mutable_times()->set_compute_s(0.02);
  p->mutable_times()->set_comm_wait_s(0.25);
  p->mutable_times()->set_optimizer_s(0.003);
  p->set_bytes_allreduced(123456789012);
  p->set_busbw_gbps(1.5);
  return w;
}

StatusResponse TwoWorkerStatus() {
  StatusResponse s;
  s.set_job_name("j");
  s.set_state(RUNNING);
  s.set_generation(3);
  s.set_restarts(2);
  s.set_world_size(2);
  s.set_epoch(1);
  s.set_step(20);
  s.set_uptime_s(12.5);
  *s.add_workers() = Worker(0, "h0", 19, 0.5);
  *s.add_workers() = Worker(1, "h\"1", 20, 0.7);
  s.mutable_workers(1)->set_straggler(true);
  s.add_stragglers("rank 1 on h1: 2x the median step");
  ShardStatus* shard = s.add_shards();
  shard->set_index(0);
  shard->set_host("s0");
  shard->set_heartbeat_age_s(0.25);
  shard->set_state("serving");
  shard->mutable_stats()->set_pushes(7);
  shard->mutable_stats()->set_pulls(9);
  shard->mutable_stats()->set_bytes_pushed(4000);
  shard->mutable_stats()->set_bytes_pulled(5000);
  shard->mutable_stats()->set_version(6);
  shard->mutable_stats()->set_rows_held(300);
  shard->mutable_stats()->set_rows_pushed(700);
  shard->mutable_stats()->set_rows_pulled(1400);
  return s;
}

TEST(CoordinatorMetricsTest, ExportsTheJobWorkersAndShards) {
  const std::string text = CoordinatorMetricsText(TwoWorkerStatus());
  EXPECT_THAT(PrometheusFormatProblems(text), ::testing::IsEmpty()) << text;
  for (const char* line : {
           "cohort_job_state{state=\"RUNNING\"} 1",
           "cohort_job_state{state=\"FORMING\"} 0",
           "cohort_job_state{state=\"STOPPED\"} 0",
           "# TYPE cohort_restarts_total counter",
           "cohort_restarts_total 2",
           "cohort_generation 3",
           "cohort_world_size 2",
           "cohort_job_step 20",
           "cohort_job_samples_per_second 300",
           "cohort_uptime_seconds 12.5",
           "cohort_stragglers 1",
           "cohort_worker_step{rank=\"0\",host=\"h0\"} 19",
           "cohort_worker_step{rank=\"1\",host=\"h\\\"1\"} 20",
           "cohort_worker_loss{rank=\"1\",host=\"h\\\"1\"} 0.7",
           "cohort_worker_samples_per_second{rank=\"1\",host=\"h\\\"1\"} 200",
           "cohort_worker_step_seconds{rank=\"0\",host=\"h0\",phase=\"data\"} "
           "0.001",
           "cohort_worker_step_seconds{rank=\"0\",host=\"h0\",phase="
           "\"comm_wait\"} 0.25",
           "cohort_worker_step_seconds{rank=\"0\",host=\"h0\",phase="
           "\"optimizer\"} 0.003",
           "# TYPE cohort_worker_allreduced_bytes_total counter",
           "cohort_worker_allreduced_bytes_total{rank=\"0\",host=\"h0\"} "
           "123456789012",
           "cohort_worker_allreduce_bus_bandwidth_bytes_per_second{rank=\"0\","
           "host=\"h0\"} 1500000000",
           "cohort_worker_heartbeat_age_seconds{rank=\"0\",host=\"h0\"} 0.5",
           "cohort_worker_straggler{rank=\"0\",host=\"h0\"} 0",
           "cohort_worker_straggler{rank=\"1\",host=\"h\\\"1\"} 1",
           "cohort_shard_pushes_total{shard=\"0\",host=\"s0\"} 7",
           "cohort_shard_pulls_total{shard=\"0\",host=\"s0\"} 9",
           "cohort_shard_pushed_bytes_total{shard=\"0\",host=\"s0\"} 4000",
           "cohort_shard_pulled_bytes_total{shard=\"0\",host=\"s0\"} 5000",
           "cohort_shard_version{shard=\"0\",host=\"s0\"} 6",
           "cohort_shard_rows_held{shard=\"0\",host=\"s0\"} 300",
           "cohort_shard_pushed_rows_total{shard=\"0\",host=\"s0\"} 700",
           "cohort_shard_pulled_rows_total{shard=\"0\",host=\"s0\"} 1400",
           "cohort_shard_heartbeat_age_seconds{shard=\"0\",host=\"s0\"} 0.25",
           "cohort_shard_serving{shard=\"0\",host=\"s0\"} 1",
       }) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("\n", line, "\n"))) << line;
  }
  // Not evaluated yet: no accuracy sample.
  EXPECT_THAT(text, Not(HasSubstr("cohort_worker_test_accuracy{")));
}

TEST(CoordinatorMetricsTest, ACountersNameEndsInTotalAndNoOtherDoes) {
  const std::string text = CoordinatorMetricsText(TwoWorkerStatus()) +
                           ShardMetricsText(ShardStats());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    const bool counter = absl::EndsWith(line, " counter");
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    EXPECT_EQ(absl::EndsWith(parts[2], "_total"), counter) << line;
  }
}

TEST(CoordinatorMetricsTest, TwoWorkersWithOneLabelSetAreExportedOnce) {
  StatusResponse s = TwoWorkerStatus();
  *s.add_workers() = Worker(0, "h0", 5, 1.0);  // e.g. while regrouping
  const std::string text = CoordinatorMetricsText(s);
  EXPECT_THAT(PrometheusFormatProblems(text), ::testing::IsEmpty()) << text;
  EXPECT_THAT(text,
              HasSubstr("cohort_worker_step{rank=\"0\",host=\"h0\"} 19\n"));
}

TEST(CoordinatorMetricsTest, AnEmptyJobIsWellFormed) {
  StatusResponse s;
  const std::string text = CoordinatorMetricsText(s);
  EXPECT_THAT(PrometheusFormatProblems(text), ::testing::IsEmpty()) << text;
  EXPECT_THAT(text, HasSubstr("cohort_job_state{state=\"FORMING\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("cohort_worker_")));
  EXPECT_THAT(text, Not(HasSubstr("cohort_shard_")));
}

TEST(ShardMetricsTest, ExportsItsStatistics) {
  ShardStats s;
  s.set_pushes(10);
  s.set_duplicate_pushes(1);
  s.set_pulls(11);
  s.set_bytes_pushed(1 << 20);
  s.set_bytes_pulled(3 << 20);
  s.set_version(10);
  s.set_min_clock(4);
  s.set_wait_s(0.75);
  s.set_checkpoint_version(-1);
  s.set_rows_held(40);
  s.set_rows_pushed(120);
  s.set_rows_pulled(250);
  for (int k = 0; k < 9; ++k) s.add_staleness_histogram(k == 0 ? 8 : k == 8);
  const std::string text = ShardMetricsText(s);
  EXPECT_THAT(PrometheusFormatProblems(text), ::testing::IsEmpty()) << text;
  for (const char* line : {
           "cohort_shard_pushes_total 10",
           "cohort_shard_duplicate_pushes_total 1",
           "cohort_shard_pulls_total 11",
           "cohort_shard_pushed_bytes_total 1048576",
           "cohort_shard_pulled_bytes_total 3145728",
           "cohort_shard_version 10",
           "cohort_shard_min_clock 4",
           "cohort_shard_pull_wait_seconds_total 0.75",
           "# TYPE cohort_shard_rows_held gauge",
           "cohort_shard_rows_held 40",
           "# TYPE cohort_shard_pushed_rows_total counter",
           "cohort_shard_pushed_rows_total 120",
           "cohort_shard_pulled_rows_total 250",
           "cohort_shard_push_staleness_total{clocks=\"0\"} 8",
           "cohort_shard_push_staleness_total{clocks=\"7\"} 0",
           "cohort_shard_push_staleness_total{clocks=\"8+\"} 1",
           "cohort_shard_checkpoint_version -1",
           "cohort_shard_restored 0",
       }) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("\n", line, "\n"))) << line;
  }
}

TEST(MetricsHistoryTest, SamplesTheRunningJob) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  MetricsHistory h(16, t0);
  StatusResponse s = TwoWorkerStatus();
  s.set_state(FORMING);
  h.Record(s, t0 + absl::Seconds(1));  // not running: ignored
  s.set_state(RUNNING);
  s.mutable_workers(1)->mutable_progress()->set_loss(std::nan(""));
  s.mutable_workers(0)->mutable_progress()->set_finished_epoch(1);
  s.mutable_workers(0)->mutable_progress()->set_finished_epoch_test_accuracy(
      0.5);
  h.Record(s, t0 + absl::Seconds(2));
  EXPECT_EQ(h.Json(),
            "{\"interval_s\":1,\"t\":[2],\"step\":[20],\"loss\":[0.5],"
            "\"samples_per_s\":[300],\"epochs\":[{\"epoch\":1,"
            "\"test_accuracy\":0.5,\"t\":2}]}\n");
}

TEST(MetricsHistoryTest, WithoutProgressNothingIsRecorded) {
  MetricsHistory h(16);
  StatusResponse s;
  s.set_state(RUNNING);
  s.add_workers()->set_rank(0);  // joined, no step yet
  h.Record(s);
  EXPECT_THAT(h.Json(), HasSubstr("\"t\":[],\"step\":[]"));
}

TEST(MetricsHistoryTest, TheLowestRanksAccuracyWins) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  MetricsHistory h(16, t0);
  WorkerResult r1;
  EpochSummary* e = r1.add_epoch_results();
  e->set_epoch(1);
  e->set_test_accuracy(0.8);
  e = r1.add_epoch_results();
  e->set_epoch(2);
  e->set_test_accuracy(-1);  // not evaluated
  h.RecordResult(1, r1, t0 + absl::Seconds(5));
  WorkerResult r0 = r1;
  r0.mutable_epoch_results(0)->set_test_accuracy(0.9);
  h.RecordResult(0, r0, t0 + absl::Seconds(6));
  h.RecordResult(1, r1, t0 + absl::Seconds(7));
  EXPECT_THAT(h.Json(), HasSubstr("\"epochs\":[{\"epoch\":1,"
                                  "\"test_accuracy\":0.9,\"t\":5}]"));
}

TEST(MetricsHistoryTest, StaysBoundedAndSpansTheWholeRun) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  MetricsHistory h(4, t0);
  StatusResponse s = TwoWorkerStatus();
  for (int i = 0; i < 20; ++i) {
    s.mutable_workers(0)->mutable_progress()->set_step(100 + i);
    s.mutable_workers(1)->mutable_progress()->set_step(100 + i);
    h.Record(s, t0 + absl::Seconds(i));
  }
  // Calls 0..19 at stride 8 once full: 0, 8, 16.
  EXPECT_THAT(h.Json(),
              HasSubstr("\"interval_s\":8,\"t\":[0,8,16],\"step\":[100,108,"
                        "116]"));
}

TEST(DashboardTest, IsSelfContainedAndPollsTheApi) {
  const std::string html(DashboardHtml());
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("getJson(\"api/status\")"));
  EXPECT_THAT(html, HasSubstr("getJson(\"api/history\")"));
  EXPECT_THAT(html, HasSubstr("setInterval(poll, 2000)"));
  for (const char* external :
       {"<script src", "<link", "url(", "@import", "<img", "https://"}) {
    EXPECT_THAT(html, Not(HasSubstr(external))) << external;
  }
  // The only URL is the SVG namespace, which is a name, not a fetch.
  size_t at = 0;
  while ((at = html.find("http://", at)) != std::string::npos) {
    EXPECT_EQ(html.substr(at, 26), "http://www.w3.org/2000/svg");
    ++at;
  }
}

}  // namespace
}  // namespace cohort
