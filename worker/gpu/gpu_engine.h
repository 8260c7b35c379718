// The GPU device engine: one model replica per GPU of this process, data
// parallel, with the same mathematics as the CPU engine (each GPU reads
// its own shard of every epoch through the distributed sampler, the
// gradients are averaged over every GPU of the job with NCCL, and every GPU
// applies the same optimizer step to its copy of the parameters). The
// all-reduce runs in buckets on a communication stream while backward is
// still running, and the next batch is uploaded on a copy stream while the
// current step computes (the step's timeline is in gpu_engine_impl.h). The
// training loop around it is the one every device shares
// (worker/training_loop.h).
//
// A single process (cohort train) all-reduces over its own GPUs; a worker
// of a multi-worker job passes DistributedContext::nccl, whose
// communicators span every GPU of every worker.
//
// These functions live in the GPU plugin (gpu_plugin_api.h), which the
// cohort binary opens at run time; GPU tests link them directly. This
// header needs no CUDA headers; without CUDA, CreateGpuEngine says so.
#ifndef COHORT_WORKER_GPU_GPU_ENGINE_H_
#define COHORT_WORKER_GPU_GPU_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/engine/device_engine.h"
#include "worker/gpu/gpu_plugin_api.h"
#include "worker/trainer.h"

namespace cohort {

class KvClient;

// The GPU device engine (worker/engine/device_engine.h) for options.gpus
// (non-empty), over `data` (which must outlive it). FAILED_PRECONDITION
// when this build has no CUDA, INVALID_ARGUMENT for a device that does not
// exist or a model whose output does not fit the data's targets,
// UNIMPLEMENTED for what the GPU engine does not do yet (parameter-server
// mode, nonfinite_gradients: NONFINITE_SKIP). Every loss, on class labels
// and on float targets, trains as on the CPU engine.
absl::StatusOr<std::unique_ptr<DeviceEngine>> CreateGpuEngine(
    const JobSpec& spec, const TrainOptions& options, const DataSplits& data);

// A GPU worker's NCCL communicators over every GPU of the job, bootstrapped
// through `kv` (the coordinator's store, scoped to the generation) under
// `key_prefix`; `algorithm` is "flat" or "hierarchical". The shared_ptr
// carries its own deleter, so callers need no CUDA headers.
// FAILED_PRECONDITION without CUDA.
absl::StatusOr<std::shared_ptr<NcclCommunicator>> CreateWorkerNccl(
    KvClient& kv, const std::string& key_prefix,
    const GpuWorkerPlacement& placement, const std::string& algorithm,
    absl::Duration timeout);

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_GPU_ENGINE_H_
