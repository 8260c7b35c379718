// Pooling on the GPU through cuDNN: MaxPool2d, AvgPool2d (padding counted
// in the divisor, as the CPU engine and PyTorch do) and GlobalAvgPool (the
// whole image, output {C}).
//
// Ownership: the layer owns its cuDNN descriptors and keeps pointers to the
// last forward input and output, which the model keeps alive until
// Backward. Thread safety: none; one thread drives a layer, on its
// GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_POOL_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_POOL_H_

#include <cudnn.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

class GpuPool : public GpuLayer {
 public:
  enum class Kind { kMax, kAvg, kGlobalAvg };
  GpuPool(Kind kind, int64_t kernel, int64_t stride, int64_t pad)
      : kind_(kind), k_(kernel), stride_(stride), pad_(pad) {}
  ~GpuPool() override;

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const Kind kind_;
  const int64_t k_, stride_, pad_;
  gpu_layers::Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  gpu_layers::TensorDesc x_desc_, y_desc_;
  const float* in_ptr_ = nullptr;
  const float* out_ptr_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_POOL_H_
