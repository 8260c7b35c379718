// PReLU (PyTorch's nn.PReLU) on the GPU with cohort's kernels
// (kernels/cuda/prelu.h) over NCHW or dense activations: one slope per
// channel (a dense input's features) or one shared by all. Same parameter,
// "weight" {num_parameters}, as the CPU layer (worker/layers/prelu.h).
//
// Ownership: the weight is a view into the model's buffers (Bind); the
// layer keeps a pointer to the last forward input, which the model keeps
// alive until Backward. Thread safety: none; one thread drives a layer, on
// its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_PRELU_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_PRELU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/prelu.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuPrelu : public GpuLayer {
 public:
  // `num_parameters`: 1 (one slope) or the input's channels.
  explicit GpuPrelu(int64_t num_parameters) : num_parameters_(num_parameters) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override { return {num_parameters_}; }
  void Bind(const std::vector<float*>& values,
            const std::vector<float*>& grads) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const int64_t num_parameters_;
  int64_t sample_size_ = 0, positions_ = 0;
  gpu::PreluShape shape_;  // set per batch
  float* weight_ = nullptr;
  float* weight_grad_ = nullptr;
  const float* in_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_PRELU_H_
