// ReLU on the GPU through cuDNN, for every activation layout (it is
// elementwise).
//
// Ownership: the layer owns its cuDNN descriptors and keeps pointers to the
// last forward input and output, which the model keeps alive until
// Backward. Thread safety: none; one thread drives a layer, on its
// GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_ACTIVATION_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_ACTIVATION_H_

#include <cudnn.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

class GpuRelu : public GpuLayer {
 public:
  GpuRelu() = default;
  ~GpuRelu() override;

  std::string Name() const override { return "relu"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  int64_t size_ = 0, n_ = -1;
  cudnnActivationDescriptor_t act_ = nullptr;
  gpu_layers::TensorDesc desc_;
  const float* in_ = nullptr;
  const float* out_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_ACTIVATION_H_
