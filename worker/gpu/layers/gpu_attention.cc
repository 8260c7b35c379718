#include "worker/gpu/layers/gpu_attention.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "kernels/cuda/attention.h"

namespace cohort {

GpuAttention::GpuAttention(int64_t heads, bool bidirectional, double dropout,
                           bool bf16)
    : heads_(heads), causal_(!bidirectional), bf16_(bf16), dropout_(dropout) {}

std::string GpuAttention::Name() const {
  return absl::StrCat("attention(", d_, ", heads ", heads_,
                      causal_ ? ", causal)" : ", bidirectional)");
}

absl::StatusOr<Shape> GpuAttention::Configure(const Shape& in) {
  if (in.size() != 2 || in[0] < 1 || in[1] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention: expects a sequence {D, L} but got ", ShapeString(in)));
  }
  d_ = in[0];
  l_ = in[1];
  if (heads_ < 1 || d_ % heads_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": heads (", heads_, ") must divide the features (", d_, ")"));
  }
  if (d_ / heads_ > gpu::kMaxAttentionHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": the GPU kernels take head dimensions up to ",
                     gpu::kMaxAttentionHeadDim, ", this layer has ",
                     d_ / heads_, "; use more heads"));
  }
  if (dropout_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": dropout on the attention probabilities (", dropout_,
        ") is not supported on GPU workers; set it to 0 or train on CPU "
        "workers"));
  }
  // Position-wise linear maps: kernel-1 convolutions over {D, L}, whose
  // weights {O, D, 1} are the CPU layer's {O, D}.
  in_proj_ = std::make_unique<GpuConv>(3 * d_, 1, 1, 0, true, true, bf16_);
  out_proj_ = std::make_unique<GpuConv>(d_, 1, 1, 0, true, true, bf16_);
  RETURN_IF_ERROR(in_proj_->Configure(in).status());
  RETURN_IF_ERROR(out_proj_->Configure(in).status());
  return in;
}

std::vector<int64_t> GpuAttention::ParamSizes() const {
  return {3 * d_ * d_, 3 * d_, d_ * d_, d_};
}

void GpuAttention::Bind(const std::vector<float*>& v,
                        const std::vector<float*>& g) {
  in_proj_->Bind({v[0], v[1]}, {g[0], g[1]});
  out_proj_->Bind({v[2], v[3]}, {g[2], g[3]});
}

absl::Status GpuAttention::Forward(GpuContext& c, const float* in, float* out,
                                   int64_t n, Mode mode) {
  n_ = n;
  const gpu::AttentionGeometry g =
      gpu::SampleMajorAttention(n, l_, heads_, d_ / heads_, causal_);
  RETURN_IF_ERROR(qkv_.Reserve(n * 3 * d_ * l_));
  RETURN_IF_ERROR(attn_.Reserve(n * d_ * l_));
  RETURN_IF_ERROR(lse_.Reserve(gpu::AttentionRowCount(g)));
  RETURN_IF_ERROR(in_proj_->Forward(c, in, qkv_.data(), n, mode));
  RETURN_IF_ERROR(gpu::AttentionForward(g, qkv_.data(), attn_.data(),
                                        lse_.data(), c.stream()));
  return out_proj_->Forward(c, attn_.data(), out, n, mode);
}

absl::Status GpuAttention::Backward(GpuContext& c, const float* dy, float* dx) {
  const gpu::AttentionGeometry g =
      gpu::SampleMajorAttention(n_, l_, heads_, d_ / heads_, causal_);
  RETURN_IF_ERROR(d_attn_.Reserve(n_ * d_ * l_));
  RETURN_IF_ERROR(d_qkv_.Reserve(n_ * 3 * d_ * l_));
  RETURN_IF_ERROR(delta_.Reserve(gpu::AttentionRowCount(g)));
  RETURN_IF_ERROR(out_proj_->Backward(c, dy, d_attn_.data()));
  RETURN_IF_ERROR(gpu::AttentionBackward(
      g, qkv_.data(), attn_.data(), d_attn_.data(), lse_.data(), delta_.data(),
      d_qkv_.data(), c.stream()));
  return in_proj_->Backward(c, d_qkv_.data(), dx);
}

}  // namespace cohort
