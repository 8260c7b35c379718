#include "worker/gpu/layers/gpu_transformer_block.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::CopyOnDevice;
using gpu_layers::kOne;

namespace {

// y += x over `n` floats.
absl::Status AddInto(GpuContext& c, const float* x, float* y, int64_t n) {
  return CublasStatus(cublasSaxpy(c.cublas(), n, &kOne, x, 1, y, 1),
                      "transformer_block residual sum");
}

}  // namespace

GpuTransformerBlock::GpuTransformerBlock(int64_t heads, int64_t mlp_ratio,
                                         bool bidirectional, double dropout,
                                         double eps, bool bf16)
    : heads_(heads), ratio_(mlp_ratio), dropout_(dropout), bf16_(bf16) {
  ln1_ = std::make_unique<GpuNorm>(0, eps, true, /*per_position=*/true);
  ln2_ = std::make_unique<GpuNorm>(0, eps, true, /*per_position=*/true);
  attn_ = std::make_unique<GpuAttention>(heads, bidirectional, 0.0, bf16);
  gelu_ = std::make_unique<GpuElementwiseActivation>(ActivationKind::kGelu);
}

std::string GpuTransformerBlock::Name() const {
  return absl::StrCat("transformer_block(", d_, ", heads ", heads_, ", mlp ",
                      ratio_, "x)");
}

absl::StatusOr<Shape> GpuTransformerBlock::Configure(const Shape& in) {
  if (in.size() != 2 || in[0] < 1 || in[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block: expects a sequence {D, L} but got ",
                     ShapeString(in)));
  }
  d_ = in[0];
  l_ = in[1];
  if (ratio_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": mlp_ratio must be positive, got ", ratio_));
  }
  if (dropout_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": dropout (", dropout_,
        ") is not supported on GPU workers; set it to 0 or train on CPU "
        "workers"));
  }
  RETURN_IF_ERROR(ln1_->Configure(in).status());
  RETURN_IF_ERROR(attn_->Configure(in).status());
  RETURN_IF_ERROR(ln2_->Configure(in).status());
  fc1_ = std::make_unique<GpuConv>(ratio_ * d_, 1, 1, 0, true, true, bf16_);
  fc2_ = std::make_unique<GpuConv>(d_, 1, 1, 0, true, true, bf16_);
  ASSIGN_OR_RETURN(const Shape hidden, fc1_->Configure(in));
  RETURN_IF_ERROR(gelu_->Configure(hidden).status());
  RETURN_IF_ERROR(fc2_->Configure(hidden).status());
  return in;
}

std::vector<int64_t> GpuTransformerBlock::ParamSizes() const {
  const int64_t r = ratio_ * d_;
  return {d_, d_, 3 * d_ * d_, 3 * d_, d_ * d_, d_,
          d_, d_, r * d_,      r,      d_ * r,  d_};
}

void GpuTransformerBlock::Bind(const std::vector<float*>& v,
                               const std::vector<float*>& g) {
  ln1_->Bind({v[0], v[1]}, {g[0], g[1]});
  attn_->Bind({v[2], v[3], v[4], v[5]}, {g[2], g[3], g[4], g[5]});
  ln2_->Bind({v[6], v[7]}, {g[6], g[7]});
  fc1_->Bind({v[8], v[9]}, {g[8], g[9]});
  fc2_->Bind({v[10], v[11]}, {g[10], g[11]});
}

absl::Status GpuTransformerBlock::Forward(GpuContext& c, const float* in,
                                          float* out, int64_t n, Mode mode) {
  n_ = n;
  const int64_t size = n * d_ * l_, hidden = ratio_ * size;
  for (DeviceFloats* b : {&a_ln1_, &a_attn_, &a_h_, &a_ln2_, &a_fc2_}) {
    RETURN_IF_ERROR(b->Reserve(size));
  }
  RETURN_IF_ERROR(a_fc1_.Reserve(hidden));
  RETURN_IF_ERROR(a_gelu_.Reserve(hidden));
  RETURN_IF_ERROR(ln1_->Forward(c, in, a_ln1_.data(), n, mode));
  RETURN_IF_ERROR(attn_->Forward(c, a_ln1_.data(), a_attn_.data(), n, mode));
  RETURN_IF_ERROR(CopyOnDevice(c, a_h_.data(), in, size));
  RETURN_IF_ERROR(AddInto(c, a_attn_.data(), a_h_.data(), size));
  RETURN_IF_ERROR(ln2_->Forward(c, a_h_.data(), a_ln2_.data(), n, mode));
  RETURN_IF_ERROR(fc1_->Forward(c, a_ln2_.data(), a_fc1_.data(), n, mode));
  RETURN_IF_ERROR(gelu_->Forward(c, a_fc1_.data(), a_gelu_.data(), n, mode));
  RETURN_IF_ERROR(fc2_->Forward(c, a_gelu_.data(), a_fc2_.data(), n, mode));
  RETURN_IF_ERROR(CopyOnDevice(c, out, a_h_.data(), size));
  return AddInto(c, a_fc2_.data(), out, size);
}

absl::Status GpuTransformerBlock::Backward(GpuContext& c, const float* dy,
                                           float* dx) {
  const int64_t size = n_ * d_ * l_, hidden = ratio_ * size;
  RETURN_IF_ERROR(g_hidden_.Reserve(hidden));
  RETURN_IF_ERROR(g_mid_.Reserve(size));
  RETURN_IF_ERROR(g_h_.Reserve(size));
  // The MLP branch: dy through fc2, GELU (in place), fc1 and ln2.
  RETURN_IF_ERROR(fc2_->Backward(c, dy, g_hidden_.data()));
  RETURN_IF_ERROR(gelu_->Backward(c, g_hidden_.data(), g_hidden_.data()));
  RETURN_IF_ERROR(fc1_->Backward(c, g_hidden_.data(), g_mid_.data()));
  RETURN_IF_ERROR(ln2_->Backward(c, g_mid_.data(), g_h_.data()));
  RETURN_IF_ERROR(AddInto(c, dy, g_h_.data(), size));  // h's skip path
  // The attention branch: dh through attn and ln1, plus the skip path.
  RETURN_IF_ERROR(attn_->Backward(c, g_h_.data(), g_mid_.data()));
  RETURN_IF_ERROR(ln1_->Backward(c, g_mid_.data(), dx));
  if (dx == nullptr) return absl::OkStatus();
  return AddInto(c, g_h_.data(), dx, size);
}

}  // namespace cohort
