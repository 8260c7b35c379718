// Prometheus metrics of the three daemons (common/prometheus.h), in base
// units: counters end in _total, durations in _seconds, sizes in _bytes.
//
//   coordinator: the job (state, generation, restarts, world size, step,
//     throughput, uptime), every worker (labels rank and host: step, loss,
//     samples/s, step time by phase, bytes all-reduced, heartbeat age,
//     straggler flag) and every parameter-server shard (labels shard and
//     host: pushes, pulls, bytes, version, heartbeat age).
//   worker: its own latest progress and place in the job.
//   shard: its own statistics.
//
// The render functions are pure and thread-safe; WorkerMetrics is
// thread-safe (the trainer updates it, the HTTP server reads it).
#ifndef COHORT_SERVER_METRICS_EXPORTER_H_
#define COHORT_SERVER_METRICS_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/http_server.h"
#include "proto/coordinator.pb.h"

namespace cohort {

// The coordinator's exposition, from its status.
std::string CoordinatorMetricsText(const StatusResponse& status);

// A shard process's exposition, from its statistics.
std::string ShardMetricsText(const ShardStats& stats);

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

// Serves `render()` at /metrics on `listen` (HOST:PORT, port 0: any), with
// Prometheus' content type. `what` names the flag in errors
// ("--metrics-listen"). Errors as HttpServer::Start's.
absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(
    const std::string& listen, const std::string& what,
    std::function<std::string()> render);

}  // namespace cohort

#endif  // COHORT_SERVER_METRICS_EXPORTER_H_
