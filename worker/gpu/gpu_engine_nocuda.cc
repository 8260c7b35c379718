// The stand-in under --config=nocuda.
#include "worker/gpu/gpu_engine.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<DeviceEngine>> CreateGpuEngine(
    const JobSpec&, const TrainOptions&, const DataSplits&) {
  return absl::FailedPreconditionError(
      "this cohort was built without CUDA (--config=nocuda): train on CPU "
      "devices (--devices=cpu:N)");
}

absl::StatusOr<std::shared_ptr<NcclCommunicator>> CreateWorkerNccl(
    KvClient&, const std::string&, const GpuWorkerPlacement&,
    const std::string&, absl::Duration) {
  return absl::FailedPreconditionError(
      "this cohort was built without CUDA (--config=nocuda): GPU workers "
      "need a CUDA build");
}

}  // namespace cohort
