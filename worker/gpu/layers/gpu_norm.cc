#include "worker/gpu/layers/gpu_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "kernels/cuda/layer_ops.h"
#include "kernels/cuda/sequence_ops.h"

namespace cohort {

std::string GpuNorm::Name() const {
  if (per_position_) {
    return absl::StrCat("layernorm(per_position, ", channels_, ")");
  }
  if (groups_ == 0) return absl::StrCat("layernorm", ShapeString(in_shape_));
  return absl::StrCat("groupnorm(", groups_, ", ", channels_, ")");
}

absl::StatusOr<Shape> GpuNorm::Configure(const Shape& in) {
  if (!(eps_ > 0) || !std::isfinite(eps_)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": eps must be a positive number, got ", eps_));
  }
  if (in.empty() || in.size() > 3 || NumElements(in) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(),
                     ": expected a non-empty per-sample input [F], [C, L] or "
                     "[C, H, W], got ",
                     ShapeString(in)));
  }
  in_shape_ = in;
  channels_ = in[0];
  inner_ = NumElements(in) / channels_;
  if (per_position_ && (groups_ != 0 || in.size() > 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": per_position expects a sequence {C, L} (or ",
                     "{C}) but got ", ShapeString(in)));
  }
  if (groups_ < 0 || (groups_ > 0 && channels_ % groups_ != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": groups (", groups_,
                     ") must divide the channels (", channels_, ")"));
  }
  return in;
}

std::vector<int64_t> GpuNorm::ParamSizes() const {
  if (!affine_) return {};
  const int64_t n =
      groups_ == 0 && !per_position_ ? NumElements(in_shape_) : channels_;
  return {n, n};
}

void GpuNorm::Bind(const std::vector<float*>& v, const std::vector<float*>& g) {
  if (!affine_) return;
  weight_ = v[0];
  bias_ = v[1];
  weight_grad_ = g[0];
  bias_grad_ = g[1];
}

namespace {

gpu::NormGeometry Geometry(int64_t groups, int64_t channels, int64_t inner,
                           int64_t n) {
  gpu::NormGeometry g;
  if (groups == 0) {  // LayerNorm: the sample is the row
    g.rows = n;
    g.groups = 1;
    g.row_size = channels * inner;
    g.inner = 1;
    g.per_element = true;
  } else {
    g.rows = n * groups;
    g.groups = groups;
    g.row_size = channels / groups * inner;
    g.inner = inner;
  }
  return g;
}

}  // namespace

absl::Status GpuNorm::Forward(GpuContext& c, const float* in, float* out,
                              int64_t n, Mode) {
  in_ = in;
  n_ = n;
  if (per_position_) {
    RETURN_IF_ERROR(mean_.Reserve(n * inner_));
    RETURN_IF_ERROR(invstd_.Reserve(n * inner_));
    return gpu::PositionNormForward(
        {n, channels_, inner_}, static_cast<float>(eps_), in, weight_, bias_,
        out, mean_.data(), invstd_.data(), c.stream());
  }
  const gpu::NormGeometry g = Geometry(groups_, channels_, inner_, n);
  RETURN_IF_ERROR(mean_.Reserve(g.rows));
  RETURN_IF_ERROR(invstd_.Reserve(g.rows));
  return gpu::NormForward(g, static_cast<float>(eps_), in, weight_, bias_, out,
                          mean_.data(), invstd_.data(), c.stream());
}

absl::Status GpuNorm::Backward(GpuContext& c, const float* dy, float* dx) {
  if (per_position_) {
    return gpu::PositionNormBackward({n_, channels_, inner_}, in_, dy, weight_,
                                     mean_.data(), invstd_.data(), dx,
                                     weight_grad_, bias_grad_, c.stream());
  }
  const gpu::NormGeometry g = Geometry(groups_, channels_, inner_, n_);
  return gpu::NormBackward(g, in_, dy, weight_, mean_.data(), invstd_.data(),
                           dx, weight_grad_, bias_grad_, c.stream());
}

}  // namespace cohort
