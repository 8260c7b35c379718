#include "worker/gpu/gpu_context.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {

absl::Status CublasStatus(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": cuBLAS: ", cublasGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::Status CudnnStatus(cudnnStatus_t s, absl::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": cuDNN: ", cudnnGetErrorString(s));
  if (s == CUDNN_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::Status CopyToDevice(void* device, const void* host, size_t bytes,
                          absl::string_view what) {
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), what));
  return CudaStatus(cudaDeviceSynchronize(), what);
}

DeviceFloats::~DeviceFloats() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceFloats::DeviceFloats(DeviceFloats&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)) {}

DeviceFloats& DeviceFloats::operator=(DeviceFloats&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

absl::Status DeviceFloats::Reserve(int64_t count) {
  if (count <= capacity_) return absl::OkStatus();
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  capacity_ = 0;
  RETURN_IF_ERROR(CudaStatus(
      cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(float)),
      absl::StrCat("cudaMalloc of ", count * sizeof(float), " bytes")));
  capacity_ = count;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuContext>> GpuContext::Create(int device) {
  std::unique_ptr<GpuContext> c(new GpuContext(device));
  RETURN_IF_ERROR(c->Activate());
  RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking),
                 "cudaStreamCreate"));
  RETURN_IF_ERROR(CublasStatus(cublasCreate(&c->cublas_), "cublasCreate"));
  RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(c->cublas_, c->stream_), "cublasSetStream"));
  // Full float32 products: the CPU engine is the reference to 1e-5, which
  // TF32 tensor cores would not meet.
  RETURN_IF_ERROR(
      CublasStatus(cublasSetMathMode(c->cublas_, CUBLAS_PEDANTIC_MATH),
                   "cublasSetMathMode"));
  RETURN_IF_ERROR(
      CublasStatus(cublasCreate(&c->cublas_lowp_), "cublasCreate (bf16)"));
  RETURN_IF_ERROR(CublasStatus(cublasSetStream(c->cublas_lowp_, c->stream_),
                               "cublasSetStream (bf16)"));
  RETURN_IF_ERROR(
      CublasStatus(cublasSetMathMode(c->cublas_lowp_, CUBLAS_DEFAULT_MATH),
                   "cublasSetMathMode (bf16)"));
  RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&c->cudnn_), "cudnnCreate"));
  RETURN_IF_ERROR(
      CudnnStatus(cudnnSetStream(c->cudnn_, c->stream_), "cudnnSetStream"));
  return c;
}

GpuContext::~GpuContext() {
  cudaSetDevice(device_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  for (DeviceFloats& s : scratch_) s = DeviceFloats();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cublas_lowp_ != nullptr) cublasDestroy(cublas_lowp_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status GpuContext::Activate() const {
  return CudaStatus(cudaSetDevice(device_),
                    absl::StrCat("cudaSetDevice(", device_, ")"));
}

absl::Status GpuContext::Synchronize() const {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

absl::StatusOr<void*> GpuContext::Workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  // The stream may still use the old workspace.
  RETURN_IF_ERROR(Synchronize());
  if (workspace_ != nullptr) cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&workspace_, bytes),
                 absl::StrCat("cudaMalloc of a ", bytes, "-byte workspace")));
  workspace_bytes_ = bytes;
  return workspace_;
}

absl::StatusOr<void*> GpuContext::Scratch(Slot slot, size_t bytes) {
  DeviceFloats& s = scratch_[static_cast<int>(slot)];
  const int64_t floats = static_cast<int64_t>((bytes + 3) / 4);
  if (floats > s.capacity()) {
    // The stream may still use the old memory.
    RETURN_IF_ERROR(Synchronize());
    RETURN_IF_ERROR(s.Reserve(floats));
  }
  return s.data();
}

absl::StatusOr<const float*> GpuContext::Ones(int64_t n) {
  if (n <= ones_count_) return ones_.data();
  RETURN_IF_ERROR(Synchronize());
  RETURN_IF_ERROR(ones_.Reserve(n));
  const std::vector<float> host(n, 1.0f);
  RETURN_IF_ERROR(CopyToDevice(ones_.data(), host.data(), n * sizeof(float),
                               "copying ones to the device"));
  ones_count_ = n;
  return ones_.data();
}

}  // namespace cohort
