#include "worker/worker_metrics.h"

#include "absl/time/clock.h"
#include "common/prometheus.h"
#include "common/worker_progress_metrics.h"

namespace cohort {

WorkerMetrics::WorkerMetrics() : started_(absl::Now()) {}

void WorkerMetrics::Joined(const JoinResponse& join) {
  absl::MutexLock lock(&mu_);
  joined_ = true;
  generation_ = join.generation();
  rank_ = join.rank();
  world_size_ = join.world_size();
  restarts_ = join.restarts();
}

void WorkerMetrics::Update(const WorkerProgress& progress) {
  absl::MutexLock lock(&mu_);
  has_progress_ = true;
  progress_ = progress;
}

std::string WorkerMetrics::Text() const {
  PrometheusText t;
  absl::MutexLock lock(&mu_);
  if (joined_) {
    t.Gauge("cohort_worker_rank", "The worker's rank in its generation.",
            rank_);
    t.Gauge("cohort_worker_generation",
            "The generation the worker last joined.", generation_);
    t.Gauge("cohort_worker_world_size", "Workers in that generation.",
            world_size_);
    t.Counter("cohort_restarts_total",
              "The job's generations opened after a failure, as of the "
              "worker's last join.",
              restarts_);
  }
  DeclareWorkerProgress(t);
  if (has_progress_) AddWorkerProgress(t, {}, progress_);
  t.Gauge("cohort_uptime_seconds", "Seconds since the worker started.",
          absl::ToDoubleSeconds(absl::Now() - started_));
  return t.Render();
}

}  // namespace cohort
