// Multi-head self-attention on the GPU: torch
// nn.MultiheadAttention(D, H, batch_first=True)(x, x, x, need_weights=False)
// with a causal mask unless bidirectional, on {D, L} sequences (NCHW
// {N, D, L} for the batch). The fused in_proj and the out_proj are
// position-wise linear maps, run as kernel-1 convolutions (GpuConv, so
// BF16 multiplies bf16 copies as every linear map does); between them the
// tiled attention kernels (kernels/cuda/attention.h) read Q, K and V
// straight from the projection's output and never build the L x L
// scores. The softmax and its gradient are float32 in both precisions.
//
// Parameters, as the CPU layer's: in_proj_weight {3D, D}, in_proj_bias
// {3D}, out_proj.weight {D, D}, out_proj.bias {D}.
//
// Dropout on the attention probabilities is not implemented on the GPU:
// Configure refuses a nonzero dropout (the model build fails with
// InvalidArgument naming the layer).
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns its projections, the QKV and attention outputs it keeps for
// backward, and the per-row statistics. Thread safety: none; one thread
// drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_ATTENTION_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuAttention : public GpuLayer {
 public:
  GpuAttention(int64_t heads, bool bidirectional, double dropout, bool bf16);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const int64_t heads_;
  const bool causal_, bf16_;
  const double dropout_;
  int64_t d_ = 0, l_ = 0, n_ = 0;
  std::unique_ptr<GpuConv> in_proj_, out_proj_;
  // Forward: qkv_ {N, 3D, L}, attn_ {N, D, L}, lse_ {N, H, L}; backward:
  // d_attn_, d_qkv_, delta_.
  DeviceFloats qkv_, attn_, lse_, d_attn_, d_qkv_, delta_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_ATTENTION_H_
