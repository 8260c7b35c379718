// Prometheus metrics of the coordinator and the parameter-server shards
// (common/prometheus.h), in base units: counters end in _total, durations
// in _seconds, sizes in _bytes.
//
//   coordinator: the job (state, generation, restarts, world size, step,
//     throughput, uptime), every worker (labels rank and host: its progress
//     as common/worker_progress_metrics.h exports it, heartbeat age,
//     straggler flag) and every parameter-server shard (labels shard and
//     host: pushes, pulls, bytes, version, heartbeat age).
//   shard: its own statistics.
//
// A worker's own metrics are worker/worker_metrics.h's; common/prometheus.h
// serves any of them (ServeMetrics). The render functions are pure and
// thread-safe.
#ifndef COHORT_SERVER_METRICS_EXPORTER_H_
#define COHORT_SERVER_METRICS_EXPORTER_H_

#include <string>

#include "proto/coordinator.pb.h"

namespace cohort {

// The coordinator's exposition, from its status.
std::string CoordinatorMetricsText(const StatusResponse& status);

// A shard process's exposition, from its statistics.
std::string ShardMetricsText(const ShardStats& stats);

}  // namespace cohort

#endif  // COHORT_SERVER_METRICS_EXPORTER_H_
