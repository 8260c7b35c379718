// The pre-norm GPT transformer block on the GPU:
//   h = x + attn(ln1(x));  y = h + mlp(ln2(h)),
// mlp = Linear(D, rD), GELU (exact erf), Linear(rD, D) at each position,
// over {D, L} sequences (NCHW {N, D, L} for the batch). Built from the
// other GPU layers: per-position GpuNorm, GpuAttention, kernel-1 GpuConv
// for the MLP's linear maps and GpuElementwiseActivation; the residual sums
// are cuBLAS axpys.
//
// Parameters, in the CPU layer's order: ln1.weight, ln1.bias,
// attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
// attn.out_proj.bias, ln2.weight, ln2.bias, mlp.0.weight {rD, D},
// mlp.0.bias, mlp.2.weight {D, rD}, mlp.2.bias.
//
// Dropout (on the attention probabilities and both branches) is not
// implemented on the GPU: Configure refuses a nonzero dropout.
//
// Ownership: parameters are views into the model's buffers; the block owns
// its parts and every intermediate activation and gradient (kept from
// forward for backward). Thread safety: none; one thread drives a layer,
// on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_TRANSFORMER_BLOCK_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_TRANSFORMER_BLOCK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_attention.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_elementwise_activation.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_norm.h"

namespace cohort {

class GpuTransformerBlock : public GpuLayer {
 public:
  GpuTransformerBlock(int64_t heads, int64_t mlp_ratio, bool bidirectional,
                      double dropout, double eps, bool bf16);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const int64_t heads_, ratio_;
  const double dropout_;
  const bool bf16_;
  int64_t d_ = 0, l_ = 0, n_ = 0;
  std::unique_ptr<GpuNorm> ln1_, ln2_;
  std::unique_ptr<GpuAttention> attn_;
  std::unique_ptr<GpuConv> fc1_, fc2_;
  std::unique_ptr<GpuElementwiseActivation> gelu_;
  // Forward: ln1(x), attn, h, ln2(h), fc1, gelu, fc2 outputs.
  DeviceFloats a_ln1_, a_attn_, a_h_, a_ln2_, a_fc1_, a_gelu_, a_fc2_;
  // Backward: gradients at the MLP's hidden layer, at ln2's output (then
  // at ln1's), and at h.
  DeviceFloats g_hidden_, g_mid_, g_h_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_TRANSFORMER_BLOCK_H_
