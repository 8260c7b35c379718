// MaxPool1d and AvgPool1d on the GPU with cohort's kernels
// (kernels/cuda/layer_ops.h) over NCL activations: N*C contiguous rows.
// PyTorch's semantics, as the CPU layer (worker/layers/pool1d.h).
//
// Ownership: the layer owns the argmax positions of the last max-pool
// forward. Thread safety: none; one thread drives a layer, on its
// GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_POOL1D_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_POOL1D_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/layer_ops.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuPool1d : public GpuLayer {
 public:
  GpuPool1d(bool max, int64_t kernel, int64_t stride, int64_t padding);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const bool max_;
  gpu::Pool1dShape shape_;  // planes set per batch
  int64_t channels_ = 0;
  DeviceFloats argmax_;  // int32 positions, stored in float-sized slots
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_POOL1D_H_
