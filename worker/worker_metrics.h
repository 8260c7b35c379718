// A worker process's Prometheus metrics (common/prometheus.h), in base
// units: its own latest progress (common/worker_progress_metrics.h) and its
// place in the job (rank, world size, generation, restarts), for its
// --metrics-listen endpoint.
//
// WorkerMetrics is thread-safe: the trainer updates it, the HTTP server
// reads it.
#ifndef COHORT_WORKER_WORKER_METRICS_H_
#define COHORT_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace cohort {

// A worker process's latest progress and place in the job, and its
// exposition.
class WorkerMetrics {
 public:
  WorkerMetrics();
  // At every (re)join: rank, world size and generation change.
  void Joined(const JoinResponse& join);
  // The progress the trainer reports (as it goes to the coordinator).
  void Update(const WorkerProgress& progress);
  std::string Text() const;

 private:
  const absl::Time started_;
  mutable absl::Mutex mu_;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  int world_size_ ABSL_GUARDED_BY(mu_) = 0;
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  bool has_progress_ ABSL_GUARDED_BY(mu_) = false;
  WorkerProgress progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_WORKER_WORKER_METRICS_H_
