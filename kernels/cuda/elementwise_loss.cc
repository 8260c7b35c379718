#include "kernels/cuda/elementwise_loss.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise_loss_launch.h"
#include "kernels/cuda/reduce_launch.h"

namespace cohort {
namespace {

constexpr char kName[] = "elementwise_loss";

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(kName, ": ", what));
}

absl::Status CheckArguments(CudaElementLoss kind, float delta,
                            const CudaElementwiseLossBuffers& b, int64_t n) {
  if (n < 0) return Invalid(absl::StrCat("bad element count ", n));
  if (kind == CudaElementLoss::kHuber && !(delta > 0)) {
    return Invalid(absl::StrCat("Huber delta ", delta, " is not > 0"));
  }
  if (b.loss == nullptr) return Invalid("null loss output");
  if (n == 0) return absl::OkStatus();
  if (b.pred == nullptr) return Invalid(absl::StrCat("null pred of ", n));
  if (b.target == nullptr) {
    if (b.labels == nullptr) {
      return Invalid(
          absl::StrCat("neither targets nor labels for ", n, " elements"));
    }
    if (b.row <= 0 || n % b.row != 0) {
      return Invalid(
          absl::StrCat(n, " elements are not whole one-hot rows of ", b.row));
    }
  }
  const size_t need = ElementwiseLossWorkspaceBytes(n);
  if (b.workspace == nullptr || b.workspace_bytes < need) {
    return Invalid(absl::StrCat("workspace for ", n, " elements has ",
                                b.workspace == nullptr ? 0 : b.workspace_bytes,
                                " bytes, needs ", need));
  }
  if (reinterpret_cast<uintptr_t>(b.workspace) % alignof(double) != 0) {
    return Invalid(
        absl::StrCat("workspace is not ", alignof(double), "-byte aligned"));
  }
  return absl::OkStatus();
}

cuda_internal::ElementKind KindOf(CudaElementLoss kind) {
  switch (kind) {
    case CudaElementLoss::kMse:
      return cuda_internal::ElementKind::kMse;
    case CudaElementLoss::kL1:
      return cuda_internal::ElementKind::kL1;
    case CudaElementLoss::kHuber:
      return cuda_internal::ElementKind::kHuber;
    case CudaElementLoss::kBce:
      return cuda_internal::ElementKind::kBce;
  }
  return cuda_internal::ElementKind::kMse;
}

}  // namespace

size_t ElementwiseLossWorkspaceBytes(int64_t n) {
  return cuda_internal::ReducePartialBytes(n < 0 ? 0 : n);
}

absl::Status ElementwiseLossAsync(CudaElementLoss kind, float delta,
                                  const CudaElementwiseLossBuffers& buffers,
                                  int64_t n, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckArguments(kind, delta, buffers, n));
  double* partials = static_cast<double*>(buffers.workspace);
  int blocks = 0;
  if (n > 0) {
    cuda_internal::ElementwiseArgs a;
    a.kind = KindOf(kind);
    a.delta = delta;
    // As worker/loss.cc rounds them: 2 / n for MSE, 1 / n otherwise, float.
    a.scale =
        (kind == CudaElementLoss::kMse ? 2.0f : 1.0f) / static_cast<float>(n);
    a.pred = buffers.pred;
    a.target = buffers.target;
    a.labels = buffers.labels;
    a.row = buffers.row;
    a.grad = buffers.grad;
    blocks = cuda_internal::ReducePartialBlocks(n);
    cuda_internal::LaunchElementwiseLoss(a, n, partials, blocks, stream);
    RETURN_IF_ERROR(LaunchStatus(kName));
  }
  cuda_internal::LaunchElementwiseLossFinish(partials, blocks, n, buffers.loss,
                                             stream);
  return LaunchStatus(absl::StrCat(kName, " finish"));
}

absl::StatusOr<float> ElementwiseLoss(CudaElementLoss kind, float delta,
                                      const CudaElementwiseLossBuffers& buffers,
                                      int64_t n, cudaStream_t stream) {
  RETURN_IF_ERROR(ElementwiseLossAsync(kind, delta, buffers, n, stream));
  float loss = 0;
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(&loss, buffers.loss, sizeof(float),
                                             cudaMemcpyDeviceToHost, stream),
                             absl::StrCat(kName, ": read the loss")));
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream),
                             absl::StrCat(kName, ": synchronize")));
  return loss;
}

}  // namespace cohort
