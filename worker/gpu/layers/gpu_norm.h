// LayerNorm and GroupNorm on the GPU with cohort's kernels
// (kernels/cuda/layer_ops.h): in the NCHW layout each (sample, group) is
// one contiguous row, normalised by one thread block. Same parameters, in
// the same order and layout, as the CPU layers (worker/layers/norm.h).
// The per-position LayerNorm of sequences (LayerNormSpec per_position)
// normalises each position of a {C, L} sample over its C features
// (kernels/cuda/sequence_ops.h), weight and bias {C}.
//
// Ownership: weight and bias are views into the model's buffers (Bind);
// the layer owns the per-row statistics it saves for backward and keeps a
// pointer to the last forward input. Thread safety: none; one thread drives
// a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_NORM_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_NORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuNorm : public GpuLayer {
 public:
  // groups == 0: LayerNorm over the whole sample (or, per_position, over
  // each position's features); else GroupNorm.
  GpuNorm(int64_t groups, double eps, bool affine, bool per_position = false)
      : groups_(groups),
        eps_(eps),
        affine_(affine),
        per_position_(per_position) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const int64_t groups_;
  const double eps_;
  const bool affine_, per_position_;
  Shape in_shape_;
  int64_t channels_ = 0, inner_ = 0, n_ = 0;
  DeviceFloats mean_, invstd_;
  float *weight_ = nullptr, *bias_ = nullptr;
  float *weight_grad_ = nullptr, *bias_grad_ = nullptr;
  const float* in_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_NORM_H_
