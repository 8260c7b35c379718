#include "kernels/cuda/reduce.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/reduce_launch.h"

namespace cohort {
namespace {

using cuda_internal::ReduceOp;

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kSumSquares:
      return "sum_squares";
    case ReduceOp::kMaxAbs:
      return "max_abs";
  }
  return "reduce";
}

absl::Status CheckVector(ReduceOp op, const float* x, int64_t n,
                         const float* out) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), ": negative length ", n));
  }
  if (n > 0 && x == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), ": null input of ", n, " floats"));
  }
  if (out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), ": null output"));
  }
  return absl::OkStatus();
}

absl::Status CheckWorkspace(ReduceOp op, int64_t n, const void* workspace,
                            size_t workspace_bytes) {
  const size_t need = ReduceWorkspaceBytes(n);
  if (workspace == nullptr || workspace_bytes < need) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(op), " of ", n, " floats: workspace has ",
        workspace == nullptr ? 0 : workspace_bytes, " bytes, needs ", need));
  }
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(double) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(op), ": workspace is not ", alignof(double), "-byte aligned"));
  }
  return absl::OkStatus();
}

absl::Status ReduceAsync(ReduceOp op, const float* x, int64_t n, float* out,
                         void* workspace, size_t workspace_bytes,
                         cudaStream_t stream) {
  RETURN_IF_ERROR(CheckVector(op, x, n, out));
  RETURN_IF_ERROR(CheckWorkspace(op, n, workspace, workspace_bytes));
  const int blocks = cuda_internal::ReducePartialBlocks(n);
  double* partials = static_cast<double*>(workspace);
  cuda_internal::LaunchReducePartials(op, x, n, partials, blocks, stream);
  RETURN_IF_ERROR(LaunchStatus(absl::StrCat(OpName(op), " partials")));
  cuda_internal::LaunchReduceFinish(op, partials, blocks, out, stream);
  return LaunchStatus(absl::StrCat(OpName(op), " finish"));
}

// Scratch (partials, then the float result) lives in one stream-ordered
// allocation, freed on the stream before the synchronization, so that
// nothing leaks on any error path.
absl::StatusOr<float> ReduceToHost(ReduceOp op, const float* x, int64_t n,
                                   cudaStream_t stream) {
  float unused = 0;
  RETURN_IF_ERROR(CheckVector(op, x, n, &unused));
  const size_t partial_bytes = ReduceWorkspaceBytes(n);
  void* scratch = nullptr;
  RETURN_IF_ERROR(CudaStatus(
      cudaMallocAsync(&scratch, partial_bytes + sizeof(float), stream),
      absl::StrCat(OpName(op), ": scratch of ", partial_bytes + sizeof(float),
                   " bytes")));
  float* out =
      reinterpret_cast<float*>(static_cast<char*>(scratch) + partial_bytes);
  float value = 0;
  absl::Status status =
      ReduceAsync(op, x, n, out, scratch, partial_bytes, stream);
  if (status.ok()) {
    status = CudaStatus(cudaMemcpyAsync(&value, out, sizeof(float),
                                        cudaMemcpyDeviceToHost, stream),
                        absl::StrCat(OpName(op), ": copy result to host"));
  }
  const absl::Status freed =
      CudaStatus(cudaFreeAsync(scratch, stream),
                 absl::StrCat(OpName(op), ": free scratch"));
  const absl::Status synced =
      CudaStatus(cudaStreamSynchronize(stream),
                 absl::StrCat(OpName(op), ": synchronize stream"));
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(freed);
  RETURN_IF_ERROR(synced);
  return value;
}

absl::Status CheckMatrix(const char* what, const float* x, int64_t rows,
                         int64_t cols, const float* out, int64_t out_size) {
  if (rows < 0 || cols < 0 ||
      (cols > 0 && rows > std::numeric_limits<int64_t>::max() / cols)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": bad shape [", rows, ", ", cols, "]"));
  }
  if (rows * cols > 0 && x == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": null input of shape [", rows, ", ", cols, "]"));
  }
  if (out_size > 0 && out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": null output of ", out_size, " floats"));
  }
  return absl::OkStatus();
}

}  // namespace

size_t ReduceWorkspaceBytes(int64_t n) {
  return cuda_internal::ReducePartialBytes(n);
}

absl::Status SumAsync(const float* x, int64_t n, float* out, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream) {
  return ReduceAsync(ReduceOp::kSum, x, n, out, workspace, workspace_bytes,
                     stream);
}

absl::Status SumSquaresAsync(const float* x, int64_t n, float* out,
                             void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  return ReduceAsync(ReduceOp::kSumSquares, x, n, out, workspace,
                     workspace_bytes, stream);
}

absl::Status MaxAbsAsync(const float* x, int64_t n, float* out, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream) {
  return ReduceAsync(ReduceOp::kMaxAbs, x, n, out, workspace, workspace_bytes,
                     stream);
}

absl::Status ColumnSumsAsync(const float* x, int64_t rows, int64_t cols,
                             float* out, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckMatrix("column_sums", x, rows, cols, out, cols));
  if (cols == 0) return absl::OkStatus();
  cuda_internal::LaunchColumnSums(x, rows, cols, out, stream);
  return LaunchStatus("column_sums");
}

absl::Status RowSumsAsync(const float* x, int64_t rows, int64_t cols,
                          float* out, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckMatrix("row_sums", x, rows, cols, out, rows));
  if (rows == 0) return absl::OkStatus();
  cuda_internal::LaunchRowSums(x, rows, cols, out, stream);
  return LaunchStatus("row_sums");
}

absl::StatusOr<float> Sum(const float* x, int64_t n, cudaStream_t stream) {
  return ReduceToHost(ReduceOp::kSum, x, n, stream);
}

absl::StatusOr<float> SumSquares(const float* x, int64_t n,
                                 cudaStream_t stream) {
  return ReduceToHost(ReduceOp::kSumSquares, x, n, stream);
}

absl::StatusOr<float> MaxAbs(const float* x, int64_t n, cudaStream_t stream) {
  return ReduceToHost(ReduceOp::kMaxAbs, x, n, stream);
}

}  // namespace cohort
