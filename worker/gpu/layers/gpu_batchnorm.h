// BatchNorm1d and BatchNorm2d on the GPU through cuDNN: per-channel
// statistics over the batch and the spatial positions (cuDNN's spatial
// mode), for {F} (BatchNorm1d over features), {C, L} and {C, H, W}. The
// running variance is updated with the unbiased batch variance, as PyTorch
// and the CPU engine do.
//
// Ownership: gamma and beta are views into the model's buffers (Bind); the
// layer owns its running statistics (Buffers), the batch statistics it
// saves for backward and its cuDNN descriptors. Thread safety: none; one
// thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_BATCHNORM_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_BATCHNORM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

class GpuBatchNorm : public GpuLayer {
 public:
  GpuBatchNorm(const BatchNormSpec& s, bool two_d)
      : eps_(s.eps() > 0 ? s.eps() : 1e-5),
        momentum_(s.momentum() > 0 ? s.momentum() : 0.1),
        two_d_(two_d) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override { return {in_.c, in_.c}; }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  std::vector<std::pair<float*, int64_t>> Buffers() override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const double eps_, momentum_;
  const bool two_d_;
  gpu_layers::Chw in_;
  int64_t n_ = -1;
  gpu_layers::TensorDesc desc_, stat_desc_;
  DeviceFloats running_mean_, running_var_, save_mean_, save_invstd_, scratch_;
  float *gamma_ = nullptr, *beta_ = nullptr;
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
  const float* in_ptr_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_BATCHNORM_H_
