// What GPU layers need from the device they run on: the device, a stream,
// cuBLAS and cuDNN handles bound to that stream, a growable workspace,
// scratch slots shared by the layers, and a vector of ones (bias
// reductions through cuBLAS).
//
// Every call runs asynchronously on stream(); results are ready once the
// stream is synchronized. Ownership: owns the stream, handles and device
// memory it hands out. Thread safety: one thread drives a context (one
// context per device and model replica).
#ifndef COHORT_WORKER_GPU_GPU_CONTEXT_H_
#define COHORT_WORKER_GPU_GPU_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

absl::Status CublasStatus(cublasStatus_t s, absl::string_view what);
absl::Status CudnnStatus(cudnnStatus_t s, absl::string_view what);

// Copies `bytes` from host memory to the device and waits until they have
// landed. cudaMemcpy from pageable memory returns once the bytes are staged,
// before the DMA completes, and the contexts' non-blocking streams do not
// wait for it: without the wait their next kernel can read stale values.
absl::Status CopyToDevice(void* device, const void* host, size_t bytes,
                          absl::string_view what);

// Device memory of `count` floats, freed on destruction.
class DeviceFloats {
 public:
  DeviceFloats() = default;
  ~DeviceFloats();
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  DeviceFloats(DeviceFloats&& other) noexcept;
  DeviceFloats& operator=(DeviceFloats&& other) noexcept;

  // Grows to at least `count` floats (contents lost when it grows).
  absl::Status Reserve(int64_t count);
  // Grows to hold at least `count` 16-bit values (bf16).
  absl::Status ReserveHalves(int64_t count) { return Reserve((count + 1) / 2); }
  uint16_t* halves() const { return reinterpret_cast<uint16_t*>(data_); }
  float* data() const { return data_; }
  int64_t capacity() const { return capacity_; }

 private:
  float* data_ = nullptr;
  int64_t capacity_ = 0;
};

class GpuContext {
 public:
  static absl::StatusOr<std::unique_ptr<GpuContext>> Create(int device);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Float32 products in full precision (pedantic math: no TF32).
  cublasHandle_t cublas() const { return cublas_; }
  // For bf16 inputs with float32 accumulation (default math: tensor cores).
  cublasHandle_t cublas_lowp() const { return cublas_lowp_; }
  cudnnHandle_t cudnn() const { return cudnn_; }

  // Scratch memory of at least `bytes`, valid until the next call.
  absl::StatusOr<void*> Workspace(size_t bytes);
  // Scratch for values that live only inside one layer call (bf16 copies of
  // a gradient, a block's gradients between its parts). Layers run one
  // after the other on stream(), so every layer can share a slot; a layer
  // must not use a slot that a layer it calls also uses while it needs it,
  // hence the fixed assignment below. Contents survive until the next
  // Scratch call for the same slot that has to grow it.
  enum class Slot {
    kLowpA,      // bf16: a conv's output, then dy in backward
    kLowpB,      // bf16: a weight gradient
    kLowpC,      // bf16: an input gradient
    kBlockSum,   // residual block: gradient at the sum
    kBlockMidA,  // residual block: gradients inside the main branch
    kBlockMidB,
    kBlockShort,  // residual block: gradient inside the shortcut
    kBlockIn,     // residual block: the shortcut's input gradient
    kCount,
  };
  absl::StatusOr<void*> Scratch(Slot slot, size_t bytes);
  // At least `n` ones (float), for bias sums and broadcasts.
  absl::StatusOr<const float*> Ones(int64_t n);
  // Makes this context's device current on the calling thread.
  absl::Status Activate() const;
  absl::Status Synchronize() const;

 private:
  explicit GpuContext(int device) : device_(device) {}

  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasHandle_t cublas_lowp_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  DeviceFloats scratch_[static_cast<int>(Slot::kCount)];
  DeviceFloats ones_;
  int64_t ones_count_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_GPU_CONTEXT_H_
