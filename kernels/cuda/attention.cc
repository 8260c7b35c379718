#include "kernels/cuda/attention.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = attention_internal;

// CUDA's grid limits in y and z (heads, samples).
constexpr int64_t kMaxGridYz = 65535;

absl::Status Invalid(absl::string_view op, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", why));
}

absl::Status CheckPointers(
    absl::string_view op,
    std::initializer_list<std::pair<absl::string_view, const void*>> ptrs) {
  for (const auto& [name, ptr] : ptrs) {
    if (ptr == nullptr) return Invalid(op, absl::StrCat(name, " is null"));
  }
  return absl::OkStatus();
}

absl::Status CheckGeometry(absl::string_view op, const AttentionGeometry& g) {
  if (g.n < 0 || g.n > kMaxGridYz || g.l < 1 || g.heads < 1 ||
      g.heads > kMaxGridYz || g.head_dim < 1 ||
      g.head_dim > kMaxAttentionHeadDim || g.qkv_feature_stride < 1 ||
      g.qkv_sample_stride < 0 || g.out_feature_stride < 1 ||
      g.out_sample_stride < 0 || !std::isfinite(g.scale) || g.scale < 0) {
    return Invalid(
        op, absl::StrCat("unsupported geometry: n ", g.n, ", l ", g.l,
                         ", heads ", g.heads, ", head_dim ", g.head_dim,
                         " (at most ", kMaxAttentionHeadDim, "), strides ",
                         g.qkv_feature_stride, "/", g.qkv_sample_stride, " ",
                         g.out_feature_stride, "/", g.out_sample_stride));
  }
  return absl::OkStatus();
}

internal::AttentionArgs Args(const AttentionGeometry& g) {
  const float scale =
      g.scale > 0 ? g.scale
                  : static_cast<float>(
                        1.0 / std::sqrt(static_cast<double>(g.head_dim)));
  return {g.n,
          g.l,
          g.heads,
          g.head_dim,
          g.causal,
          g.qkv_feature_stride,
          g.qkv_sample_stride,
          g.out_feature_stride,
          g.out_sample_stride,
          scale};
}

absl::Status Prepare(absl::string_view op) {
  return CudaStatus(internal::PrepareAttentionKernels(),
                    absl::StrCat(op, ": setting shared memory limits"));
}

}  // namespace

AttentionGeometry ChannelMajorAttention(int64_t n, int64_t l, int64_t heads,
                                        int64_t head_dim, bool causal) {
  AttentionGeometry g;
  g.n = n;
  g.l = l;
  g.heads = heads;
  g.head_dim = head_dim;
  g.causal = causal;
  g.qkv_feature_stride = g.out_feature_stride = n * l;
  g.qkv_sample_stride = g.out_sample_stride = l;
  return g;
}

AttentionGeometry SampleMajorAttention(int64_t n, int64_t l, int64_t heads,
                                       int64_t head_dim, bool causal) {
  AttentionGeometry g;
  g.n = n;
  g.l = l;
  g.heads = heads;
  g.head_dim = head_dim;
  g.causal = causal;
  g.qkv_feature_stride = g.out_feature_stride = l;
  g.qkv_sample_stride = 3 * heads * head_dim * l;
  g.out_sample_stride = heads * head_dim * l;
  return g;
}

int64_t AttentionRowCount(const AttentionGeometry& g) {
  return g.n * g.heads * g.l;
}

absl::Status AttentionForward(const AttentionGeometry& g, const float* qkv,
                              float* out, float* lse, cudaStream_t stream) {
  constexpr absl::string_view kOp = "attention_forward";
  RETURN_IF_ERROR(CheckGeometry(kOp, g));
  if (g.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"qkv", qkv}, {"out", out}, {"lse", lse}}));
  RETURN_IF_ERROR(Prepare(kOp));
  internal::LaunchAttentionForward(Args(g), qkv, out, lse, stream);
  return LaunchStatus(kOp);
}

absl::Status AttentionBackward(const AttentionGeometry& g, const float* qkv,
                               const float* out, const float* grad_out,
                               const float* lse, float* delta, float* grad_qkv,
                               cudaStream_t stream) {
  constexpr absl::string_view kOp = "attention_backward";
  RETURN_IF_ERROR(CheckGeometry(kOp, g));
  if (g.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"qkv", qkv},
                                      {"out", out},
                                      {"grad_out", grad_out},
                                      {"lse", lse},
                                      {"delta", delta},
                                      {"grad_qkv", grad_qkv}}));
  if (grad_qkv == qkv) return Invalid(kOp, "grad_qkv must not be qkv");
  RETURN_IF_ERROR(Prepare(kOp));
  internal::LaunchAttentionBackward(Args(g), qkv, out, grad_out, lse, delta,
                                    grad_qkv, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
