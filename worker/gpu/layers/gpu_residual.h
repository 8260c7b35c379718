// The CPU engine's residual blocks (worker/layers/residual.h) on the GPU,
// in their parameter order: stages of conv + BatchNorm (+ ReLU but for the
// last), then the shortcut (identity, or a 1x1 conv with the stride and a
// BatchNorm), the sum and a ReLU.
//   basic:      conv3x3(stride) | conv3x3             (out channels each)
//   bottleneck: conv1x1 (out/4) | conv3x3(stride) (out/4) | conv1x1 (out)
// The forward activations stay in the block for backward; the gradients
// between its parts live in the context's shared block slots, since no two
// blocks run backward at once.
//
// Ownership: the block owns its parts and their activations; parameters are
// views into the model's buffers (Bind). Thread safety: none; one thread
// drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_RESIDUAL_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_RESIDUAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_activation.h"
#include "worker/gpu/layers/gpu_batchnorm.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuResidual : public GpuLayer {
 public:
  GpuResidual(int64_t out, int64_t stride, bool bottleneck, bool bf16);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  std::vector<std::pair<float*, int64_t>> Buffers() override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  struct Stage {
    std::unique_ptr<GpuConv> conv;
    std::unique_ptr<GpuBatchNorm> bn;
    std::unique_ptr<GpuRelu> relu;  // null for the last stage
    int64_t size = 0;               // per-sample output size
    DeviceFloats a, b, r;           // conv, bn and relu outputs
  };
  void AddStage(int64_t out, int64_t k, int64_t stride, int64_t pad);
  std::vector<GpuLayer*> Parts() const;
  static absl::StatusOr<float*> Floats(GpuContext& c, GpuContext::Slot slot,
                                       int64_t count);
  absl::Status Reserve(int64_t n);

  const int64_t out_, stride_;
  const bool bottleneck_, bf16_;
  int64_t in_c_ = 0, in_size_ = 0, out_size_ = 0, widest_ = 0, n_ = 0;
  std::vector<Stage> stages_;
  GpuRelu relu_out_;
  std::unique_ptr<GpuConv> down_conv_;
  std::unique_ptr<GpuBatchNorm> down_bn_;
  DeviceFloats sum_, s1_, s2_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_RESIDUAL_H_
