// AdaptiveAvgPool2d on the GPU with cohort's kernels
// (kernels/cuda/adaptive_pool.h) over NCHW activations: N*C contiguous
// planes. PyTorch's semantics, as the CPU layer
// (worker/layers/adaptive_pool.h).
//
// Ownership: the layer keeps only its geometry. Thread safety: none; one
// thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_ADAPTIVE_POOL_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_ADAPTIVE_POOL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/adaptive_pool.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuAdaptiveAvgPool2d : public GpuLayer {
 public:
  // `output`: the output's height and width.
  explicit GpuAdaptiveAvgPool2d(int64_t output) : output_(output) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const int64_t output_;
  gpu::AdaptivePool2dShape shape_;  // planes set per batch
  int64_t channels_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_ADAPTIVE_POOL_H_
