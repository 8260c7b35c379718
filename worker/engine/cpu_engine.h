// The CPU device engine: R model replicas in this process, data parallel.
//
// Replica r runs forward and backward on its own thread into its own
// gradient buffer; the gradients are averaged into replica 0's buffer (by
// the exchange while backward runs, or here after it), and the optimizer
// steps the one parameter buffer all replicas share, each replica's thread
// taking a slice of it, so the reduction and the optimizer run in parallel
// too.
//
// Ownership: owns the replicas and the optimizer state; borrows the data
// sets, the DistributedContext and the timeline. Thread safety: as
// DeviceEngine.
#ifndef COHORT_WORKER_ENGINE_CPU_ENGINE_H_
#define COHORT_WORKER_ENGINE_CPU_ENGINE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/engine/device_engine.h"
#include "worker/trainer.h"

namespace cohort {

// Builds the replicas of spec's model for `data` (which must outlive the
// engine); INVALID_ARGUMENT when the model does not fit the data.
absl::StatusOr<std::unique_ptr<DeviceEngine>> CreateCpuEngine(
    const JobSpec& spec, const TrainOptions& options, const DataSplits& data);

}  // namespace cohort

#endif  // COHORT_WORKER_ENGINE_CPU_ENGINE_H_
