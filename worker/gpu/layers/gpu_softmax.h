// Softmax over the features (PyTorch's nn.Softmax(dim=1)) on the GPU with
// cohort's kernels (kernels/cuda/softmax.h): over each row of dense
// {N, F} activations and across the channels at each position of NCHW
// ones. As the CPU layer (worker/layers/softmax.h), backward recomputes
// the probabilities from the forward input.
//
// Ownership: the layer owns nothing; it keeps a pointer to the last forward
// input, which the model keeps alive until Backward. Thread safety: none;
// one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_SOFTMAX_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_SOFTMAX_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/softmax.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuSoftmax : public GpuLayer {
 public:
  std::string Name() const override { return "softmax"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  int64_t channels_ = 0, positions_ = 0;
  gpu::SoftmaxShape shape_;  // outer set per batch
  const float* in_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_SOFTMAX_H_
