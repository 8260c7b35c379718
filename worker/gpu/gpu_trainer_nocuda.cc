// The stand-in under --config=nocuda.
#include "worker/gpu/gpu_trainer.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<Trainer>> CreateGpuTrainer(const JobSpec&,
                                                          const TrainOptions&) {
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
