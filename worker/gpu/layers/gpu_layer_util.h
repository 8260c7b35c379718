// Helpers that several GPU layers share: the scalars cuBLAS and cuDNN take
// by pointer, per-sample shapes as cuDNN's C x H x W, an owner of a cuDNN
// tensor descriptor, bf16 copies and device-to-device copies. Only the
// layers in this package use them.
//
// Ownership: TensorDesc owns its descriptor; the functions own nothing and
// work on the caller's memory. Thread safety: none beyond the GpuContext's;
// each call runs on the context's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_LAYER_UTIL_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_LAYER_UTIL_H_

#include <cudnn.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "worker/gpu/gpu_context.h"

namespace cohort {
namespace gpu_layers {

// alpha and beta of cuBLAS and cuDNN calls (host pointer mode).
inline constexpr float kOne = 1.0f;
inline constexpr float kZero = 0.0f;

// {C, H, W} stays; {C, L} is a 1 x L image; {F} a 1 x 1 one.
struct Chw {
  int64_t c = 1, h = 1, w = 1;
};
Chw AsChw(const Shape& s);

// RAII owner of a cuDNN NCHW tensor descriptor, created on first Set.
class TensorDesc {
 public:
  TensorDesc() = default;
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

  absl::Status Set(int64_t n, int64_t c, int64_t h, int64_t w,
                   cudnnDataType_t type = CUDNN_DATA_FLOAT);
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// bf16 copies: float32 -> bf16 into `to` (grown as needed), and back.
absl::Status ToBf16(GpuContext& c, const float* from, int64_t n,
                    DeviceFloats& to);
// The same into the context's scratch `slot`, for a copy that lives only
// inside one layer call.
absl::StatusOr<uint16_t*> ToBf16Scratch(GpuContext& c, const float* from,
                                        int64_t n, GpuContext::Slot slot);

// Copies `n` floats device to device on the context's stream.
absl::Status CopyOnDevice(GpuContext& c, float* dst, const float* src,
                          int64_t n);

}  // namespace gpu_layers
}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LAYER_UTIL_H_
