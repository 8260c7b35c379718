#include "worker/worker_metrics.h"

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/prometheus_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WorkerProgress Progress(int64_t step, double loss) {
  WorkerProgress p;
  p.set_step(step);
  p.set_epoch(1);
  p.set_loss(loss);
  p.set_samples_per_s(200);
  p.mutable_times()->set_data_s(0.001);
  p.mutable_times()->set_compute_s(0.02);
  p.mutable_times()->set_comm_wait_s(0.25);
  p.mutable_times()->set_optimizer_s(0.003);
  p.set_bytes_allreduced(123456789012);
  p.set_busbw_gbps(1.5);
  return p;
}

TEST(WorkerMetricsTest, ExportsItsLatestProgressAndPlace) {
  WorkerMetrics m;
  std::string text = m.Text();
  EXPECT_THAT(PrometheusFormatProblems(text), ::testing::IsEmpty()) << text;
  EXPECT_THAT(text, HasSubstr("\ncohort_uptime_seconds "));
  EXPECT_THAT(text, Not(HasSubstr("cohort_worker_")));

  JoinResponse join;
  join.set_generation(2);
  join.set_rank(1);
  join.set_world_size(3);
  join.set_restarts(1);
  m.Joined(join);
  WorkerProgress p = Progress(42, 0.25);
  p.set_finished_epoch(2);
  p.set_finished_epoch_test_accuracy(0.875);
  m.Update(p);
  text = m.Text();
  EXPECT_THAT(PrometheusFormatProblems(text), ::testing::IsEmpty()) << text;
  for (const char* line : {
           "cohort_worker_rank 1",
           "cohort_worker_generation 2",
           "cohort_worker_world_size 3",
           "cohort_restarts_total 1",
           "cohort_worker_step 42",
           "cohort_worker_loss 0.25",
           "cohort_worker_samples_per_second 200",
           "cohort_worker_step_seconds{phase=\"compute\"} 0.02",
           "cohort_worker_allreduced_bytes_total 123456789012",
           "cohort_worker_test_accuracy 0.875",
           "cohort_worker_finished_epochs 2",
       }) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("\n", line, "\n"))) << line;
  }
}

TEST(WorkerMetricsTest, UpdatesAndScrapesMayRace) {
  WorkerMetrics m;
  std::thread writer([&m] {
    for (int i = 1; i <= 2000; ++i) {
      WorkerProgress p;
      p.set_step(i);
      m.Update(p);
    }
  });
  for (int i = 0; i < 200; ++i) {
    EXPECT_THAT(PrometheusFormatProblems(m.Text()), ::testing::IsEmpty());
  }
  writer.join();
  EXPECT_THAT(m.Text(), HasSubstr("\ncohort_worker_step 2000\n"));
}

}  // namespace
}  // namespace cohort
