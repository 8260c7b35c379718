// Upsample (PyTorch's nn.Upsample(scale_factor=k), nearest or bilinear
// with align_corners=False) on the GPU with cohort's kernels
// (kernels/cuda/upsample.h) over NCHW activations: N*C contiguous planes.
// PyTorch's semantics, as the CPU layer (worker/layers/upsample.h).
//
// Ownership: the layer keeps only its geometry. Thread safety: none; one
// thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_UPSAMPLE_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_UPSAMPLE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/upsample.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuUpsample : public GpuLayer {
 public:
  GpuUpsample(int64_t scale, bool bilinear)
      : scale_(scale), bilinear_(bilinear) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const int64_t scale_;
  const bool bilinear_;
  gpu::UpsampleShape shape_;  // planes set per batch
  int64_t channels_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_UPSAMPLE_H_
