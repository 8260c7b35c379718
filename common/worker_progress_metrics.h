// The Prometheus families of a worker's progress (WorkerProgress in
// proto/coordinator.proto): step, epoch, loss, throughput, step time by
// phase, all-reduce bytes and bandwidth, test accuracy. Shared by the
// coordinator's view of every worker (server/metrics_exporter.h, labels
// rank and host) and a worker's own /metrics (worker/worker_metrics.h, no
// labels: the scrape target is the worker), so that both export the same
// names with the same help.
//
// Plain functions that write into the caller's PrometheusText; thread-safe
// for distinct texts.
#ifndef COHORT_COMMON_WORKER_PROGRESS_METRICS_H_
#define COHORT_COMMON_WORKER_PROGRESS_METRICS_H_

#include "common/prometheus.h"
#include "proto/coordinator.pb.h"

namespace cohort {

// Declares the families, once per text.
void DeclareWorkerProgress(PrometheusText& t);

// One worker's samples of those families, with `labels`.
void AddWorkerProgress(PrometheusText& t, const PrometheusLabels& labels,
                       const WorkerProgress& p);

}  // namespace cohort

#endif  // COHORT_COMMON_WORKER_PROGRESS_METRICS_H_
