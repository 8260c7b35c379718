#include "worker/gpu/layers/gpu_layer_util.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/ops.h"

namespace cohort {
namespace gpu_layers {

Chw AsChw(const Shape& s) {
  if (s.size() == 3) return {s[0], s[1], s[2]};
  if (s.size() == 2) return {s[0], 1, s[1]};
  return {s.empty() ? 1 : s[0], 1, 1};
}

TensorDesc::~TensorDesc() {
  if (d_ != nullptr) cudnnDestroyTensorDescriptor(d_);
}

absl::Status TensorDesc::Set(int64_t n, int64_t c, int64_t h, int64_t w,
                             cudnnDataType_t type) {
  if (d_ == nullptr) {
    RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&d_),
                                "cudnnCreateTensorDescriptor"));
  }
  return CudnnStatus(
      cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, type, n, c, h, w),
      absl::StrCat("tensor descriptor ", n, "x", c, "x", h, "x", w));
}

absl::Status ToBf16(GpuContext& c, const float* from, int64_t n,
                    DeviceFloats& to) {
  RETURN_IF_ERROR(to.ReserveHalves(n));
  return gpu::FloatToBf16(from, to.halves(), n, c.stream());
}

absl::StatusOr<uint16_t*> ToBf16Scratch(GpuContext& c, const float* from,
                                        int64_t n, GpuContext::Slot slot) {
  ASSIGN_OR_RETURN(void* p, c.Scratch(slot, n * sizeof(uint16_t)));
  uint16_t* to = static_cast<uint16_t*>(p);
  RETURN_IF_ERROR(gpu::FloatToBf16(from, to, n, c.stream()));
  return to;
}

absl::Status CopyOnDevice(GpuContext& c, float* dst, const float* src,
                          int64_t n) {
  return CudaStatus(cudaMemcpyAsync(dst, src, n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, c.stream()),
                    "device copy");
}

}  // namespace gpu_layers
}  // namespace cohort
