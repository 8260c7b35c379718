#include "server/metrics_exporter.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/prometheus.h"
#include "common/worker_progress_metrics.h"

namespace cohort {
namespace {

using Type = PrometheusText::Type;

void AddJob(PrometheusText& t, const StatusResponse& s) {
  t.Declare("cohort_job_state", Type::kGauge,
            "1 for the job's current state, 0 for the others.");
  for (int state = JobState_MIN; state <= JobState_MAX; ++state) {
    if (!JobState_IsValid(state)) continue;
    t.Add("cohort_job_state",
          {{"state", JobState_Name(static_cast<JobState>(state))}},
          s.state() == state ? 1 : 0);
  }
  t.Gauge("cohort_generation", "The job's current generation (from 1).",
          s.generation());
  t.Counter("cohort_restarts_total",
            "Generations opened after a failure (against "
            "cluster.max_restarts).",
            s.restarts());
  t.Gauge("cohort_job_regrouping",
          "1 while the job regroups after a failure or a new worker.",
          s.regrouping() ? 1 : 0);
  t.Gauge("cohort_world_size", "Workers in the current generation.",
          s.world_size());
  t.Gauge("cohort_job_epoch", "The job's current epoch (from 0).", s.epoch());
  t.Gauge("cohort_job_step", "The newest step any worker has reported.",
          s.step());
  double samples_per_s = 0;
  for (const WorkerStatus& w : s.workers()) {
    samples_per_s += w.progress().samples_per_s();
  }
  t.Gauge("cohort_job_samples_per_second",
          "The job's training throughput: the workers' summed.", samples_per_s);
  t.Gauge("cohort_stragglers", "Workers flagged as stragglers now.",
          s.stragglers_size());
  t.Gauge("cohort_uptime_seconds", "Seconds since the coordinator started.",
          s.uptime_s());
}

void AddWorkers(PrometheusText& t, const StatusResponse& s) {
  DeclareWorkerProgress(t);
  t.Declare("cohort_worker_heartbeat_age_seconds", Type::kGauge,
            "Seconds since the worker's last heartbeat.");
  t.Declare("cohort_worker_straggler", Type::kGauge,
            "1 when the worker's own step time has been over 1.5x the "
            "others' median for 20 steps.");
  t.Declare("cohort_worker_busy_vs_median_ratio", Type::kGauge,
            "The worker's own step time over the other workers' median.");
  t.Declare("cohort_worker_finished", Type::kGauge,
            "1 once the worker has reported its end.");
  for (const WorkerStatus& w : s.workers()) {
    const PrometheusLabels labels = {{"rank", absl::StrCat(w.rank())},
                                     {"host", w.host()}};
    AddWorkerProgress(t, labels, w.progress());
    t.Add("cohort_worker_heartbeat_age_seconds", labels, w.heartbeat_age_s());
    t.Add("cohort_worker_straggler", labels, w.straggler() ? 1 : 0);
    t.Add("cohort_worker_busy_vs_median_ratio", labels, w.busy_vs_median());
    t.Add("cohort_worker_finished", labels, w.finished() ? 1 : 0);
  }
}

// The counters of a shard's statistics, as a shard's own /metrics and the
// coordinator's view of every shard share them.
void DeclareShardStats(PrometheusText& t) {
  t.Declare("cohort_shard_pushes_total", Type::kCounter,
            "Gradient pushes applied (retried duplicates not counted).");
  t.Declare("cohort_shard_duplicate_pushes_total", Type::kCounter,
            "Retried pushes acknowledged without being applied again.");
  t.Declare("cohort_shard_pulls_total", Type::kCounter,
            "Parameter pulls served.");
  t.Declare("cohort_shard_pushed_bytes_total", Type::kCounter,
            "Gradient bytes received.");
  t.Declare("cohort_shard_pulled_bytes_total", Type::kCounter,
            "Parameter bytes sent.");
  t.Declare("cohort_shard_version", Type::kGauge,
            "Updates applied to the shard's parameters.");
  t.Declare("cohort_shard_min_clock", Type::kGauge,
            "SYNC: the slowest worker's clock; SSP and ASYNC: rounds whose "
            "every chunk is applied.");
  t.Declare("cohort_shard_pull_wait_seconds_total", Type::kCounter,
            "Time pulls spent waiting for slower workers.");
  t.Declare("cohort_shard_rows_held", Type::kGauge,
            "Rows of sparse tables the shard stores (rows a gradient "
            "reached).");
  t.Declare("cohort_shard_pushed_rows_total", Type::kCounter,
            "Rows of sparse tables whose gradients pushes carried.");
  t.Declare("cohort_shard_pulled_rows_total", Type::kCounter,
            "Rows of sparse tables sent to workers.");
}

void AddShardStats(PrometheusText& t, const PrometheusLabels& labels,
                   const ShardStats& s) {
  t.Add("cohort_shard_pushes_total", labels, s.pushes());
  t.Add("cohort_shard_duplicate_pushes_total", labels, s.duplicate_pushes());
  t.Add("cohort_shard_pulls_total", labels, s.pulls());
  t.Add("cohort_shard_pushed_bytes_total", labels, s.bytes_pushed());
  t.Add("cohort_shard_pulled_bytes_total", labels, s.bytes_pulled());
  t.Add("cohort_shard_version", labels, s.version());
  t.Add("cohort_shard_min_clock", labels, s.min_clock());
  t.Add("cohort_shard_pull_wait_seconds_total", labels, s.wait_s());
  t.Add("cohort_shard_rows_held", labels, s.rows_held());
  t.Add("cohort_shard_pushed_rows_total", labels, s.rows_pushed());
  t.Add("cohort_shard_pulled_rows_total", labels, s.rows_pulled());
}

void AddShards(PrometheusText& t, const StatusResponse& s) {
  DeclareShardStats(t);
  t.Declare("cohort_shard_heartbeat_age_seconds", Type::kGauge,
            "Seconds since the shard's last heartbeat.");
  t.Declare("cohort_shard_serving", Type::kGauge,
            "1 while the shard serves; 0 while it is dead or a replacement "
            "restores.");
  t.Declare("cohort_shard_restarts_total", Type::kCounter,
            "Replacements this shard index has had.");
  t.Declare("cohort_shard_parameters", Type::kGauge,
            "Parameter elements the shard holds.");
  for (const ShardStatus& shard : s.shards()) {
    const PrometheusLabels labels = {{"shard", absl::StrCat(shard.index())},
                                     {"host", shard.host()}};
    AddShardStats(t, labels, shard.stats());
    t.Add("cohort_shard_heartbeat_age_seconds", labels,
          shard.heartbeat_age_s());
    t.Add("cohort_shard_serving", labels,
          shard.state().empty() || shard.state() == "serving" ? 1 : 0);
    t.Add("cohort_shard_restarts_total", labels, shard.restarts());
    t.Add("cohort_shard_parameters", labels, shard.parameters());
  }
}

}  // namespace

std::string CoordinatorMetricsText(const StatusResponse& status) {
  PrometheusText t;
  AddJob(t, status);
  AddWorkers(t, status);
  AddShards(t, status);
  return t.Render();
}

std::string ShardMetricsText(const ShardStats& stats) {
  PrometheusText t;
  DeclareShardStats(t);
  AddShardStats(t, {}, stats);
  t.Declare("cohort_shard_push_staleness_total", Type::kCounter,
            "Pushes by staleness: how many updates (in clocks) older than "
            "the newest their parameters were when applied; the last bucket "
            "counts that many and more.");
  const int buckets = stats.staleness_histogram_size();
  for (int k = 0; k < buckets; ++k) {
    t.Add(
        "cohort_shard_push_staleness_total",
        {{"clocks", k + 1 < buckets ? absl::StrCat(k) : absl::StrCat(k, "+")}},
        stats.staleness_histogram(k));
  }
  t.Gauge("cohort_shard_checkpoint_version",
          "The version of the newest checkpoint the shard wrote (-1: none).",
          stats.checkpoint_version());
  t.Gauge("cohort_shard_restored",
          "1 for a replacement shard that restored a checkpoint.",
          stats.restored() ? 1 : 0);
  if (stats.restored()) {
    t.Gauge("cohort_shard_restored_version",
            "The checkpoint version a replacement restored.",
            stats.restored_version());
  }
  return t.Render();
}

}  // namespace cohort
