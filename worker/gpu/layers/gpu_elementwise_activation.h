// GELU, SiLU, tanh, sigmoid and LeakyReLU on the GPU with cohort's kernels
// (kernels/cuda/layer_ops.h), for every activation layout (elementwise).
//
// Ownership: the layer owns nothing; it keeps a pointer to the last forward
// input, which the model keeps alive until Backward. Thread safety: none;
// one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_ELEMENTWISE_ACTIVATION_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_ELEMENTWISE_ACTIVATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/activations.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuElementwiseActivation : public GpuLayer {
 public:
  explicit GpuElementwiseActivation(ActivationKind kind,
                                    double negative_slope = 0.01)
      : kind_(kind), slope_(negative_slope) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const ActivationKind kind_;
  const double slope_;
  int64_t size_ = 0, count_ = 0;
  const float* in_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_ELEMENTWISE_ACTIVATION_H_
