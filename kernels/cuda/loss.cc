#include "kernels/cuda/loss.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/loss_launch.h"

namespace cohort {
namespace {

constexpr char kName[] = "softmax_cross_entropy";
constexpr unsigned long long kNoBadRow = ~0ULL;

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(kName, ": ", what));
}

absl::Status CheckShape(const CudaCrossEntropyBuffers& b, int64_t n,
                        int64_t c) {
  if (n < 0 || c < 0 ||
      (c > 0 && n > std::numeric_limits<int64_t>::max() / c)) {
    return Invalid(absl::StrCat("bad logits shape [", n, ", ", c, "]"));
  }
  if (n * c > 0 && b.logits == nullptr) {
    return Invalid(absl::StrCat("null logits of shape [", n, ", ", c, "]"));
  }
  if (n > 0 && b.labels == nullptr) {
    return Invalid(absl::StrCat("null labels for ", n, " rows"));
  }
  if (b.loss == nullptr) return Invalid("null loss output");
  if (b.positions < 1 || n % b.positions != 0) {
    return Invalid(absl::StrCat("positions ", b.positions,
                                " does not divide the ", n, " rows"));
  }
  if (!(b.label_smoothing >= 0 && b.label_smoothing < 1)) {
    return Invalid(absl::StrCat("label_smoothing ", b.label_smoothing,
                                " is outside [0, 1)"));
  }
  return absl::OkStatus();
}

absl::Status CheckWorkspace(const CudaCrossEntropyBuffers& b, int64_t n) {
  const size_t need = SoftmaxCrossEntropyWorkspaceBytes(n);
  if (b.workspace == nullptr || b.workspace_bytes < need) {
    return Invalid(absl::StrCat("workspace for ", n, " rows has ",
                                b.workspace == nullptr ? 0 : b.workspace_bytes,
                                " bytes, needs ", need));
  }
  if (reinterpret_cast<uintptr_t>(b.workspace) % alignof(double) != 0) {
    return Invalid(
        absl::StrCat("workspace is not ", alignof(double), "-byte aligned"));
  }
  return absl::OkStatus();
}

// Copies one value from the device and waits for `stream` (and so for
// everything queued on it before).
template <typename T>
absl::Status ReadBack(const T* device, T* host, cudaStream_t stream,
                      absl::string_view what) {
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host, device, sizeof(T), cudaMemcpyDeviceToHost, stream),
      absl::StrCat(kName, ": read ", what)));
  return CudaStatus(cudaStreamSynchronize(stream),
                    absl::StrCat(kName, ": synchronize for ", what));
}

}  // namespace

size_t SoftmaxCrossEntropyWorkspaceBytes(int64_t n) {
  return cuda_internal::CrossEntropyWorkspaceBytes(n < 0 ? 0 : n);
}

absl::Status SoftmaxCrossEntropyAsync(const CudaCrossEntropyBuffers& buffers,
                                      int64_t n, int64_t c,
                                      cudaStream_t stream) {
  RETURN_IF_ERROR(CheckShape(buffers, n, c));
  RETURN_IF_ERROR(CheckWorkspace(buffers, n));
  const cuda_internal::CrossEntropyWorkspace ws =
      cuda_internal::CrossEntropyWorkspaceAt(buffers.workspace, n);
  // All bits set means "no bad row"; the kernel lowers it with atomicMin.
  RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(ws.first_bad_row, 0xff,
                                             sizeof(*ws.first_bad_row), stream),
                             absl::StrCat(kName, ": clear bad-row flag")));
  if (n > 0) {
    const float scale = 1.0f / static_cast<float>(n);  // as worker/loss.cc
    cuda_internal::LaunchCrossEntropyRows(
        buffers.logits, buffers.labels, n, c, buffers.positions, scale,
        buffers.label_smoothing, buffers.grad, ws, stream);
    RETURN_IF_ERROR(LaunchStatus(absl::StrCat(kName, " rows")));
  }
  cuda_internal::LaunchCrossEntropyFinish(ws, n, buffers.loss, buffers.correct,
                                          stream);
  return LaunchStatus(absl::StrCat(kName, " finish"));
}

absl::Status CheckSoftmaxCrossEntropyLabels(
    const CudaCrossEntropyBuffers& buffers, int64_t n, int64_t c,
    cudaStream_t stream) {
  RETURN_IF_ERROR(CheckShape(buffers, n, c));
  RETURN_IF_ERROR(CheckWorkspace(buffers, n));
  const cuda_internal::CrossEntropyWorkspace ws =
      cuda_internal::CrossEntropyWorkspaceAt(buffers.workspace, n);
  unsigned long long bad_row = kNoBadRow;
  RETURN_IF_ERROR(ReadBack(ws.first_bad_row, &bad_row, stream, "bad-row flag"));
  if (bad_row == kNoBadRow) return absl::OkStatus();
  if (bad_row >= static_cast<unsigned long long>(n)) {
    return absl::InternalError(
        absl::StrCat(kName, ": bad-row flag ", bad_row, " is past the ", n,
                     " rows (workspace reused by another call?)"));
  }
  int32_t label = 0;
  RETURN_IF_ERROR(ReadBack(buffers.labels + bad_row, &label, stream,
                           absl::StrCat("label of row ", bad_row)));
  return Invalid(absl::StrCat("label ", label, " of row ", bad_row,
                              " is outside [0, ", c, ")"));
}

absl::StatusOr<float> SoftmaxCrossEntropy(
    const CudaCrossEntropyBuffers& buffers, int64_t n, int64_t c,
    cudaStream_t stream) {
  RETURN_IF_ERROR(SoftmaxCrossEntropyAsync(buffers, n, c, stream));
  RETURN_IF_ERROR(CheckSoftmaxCrossEntropyLabels(buffers, n, c, stream));
  float loss = 0;
  RETURN_IF_ERROR(ReadBack<float>(buffers.loss, &loss, stream, "loss"));
  return loss;
}

}  // namespace cohort
