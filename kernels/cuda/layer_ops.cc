#include "kernels/cuda/layer_ops.h"

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layer_ops_launch.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = layer_ops_internal;

static_assert(static_cast<int>(ActivationKind::kGelu) == 0 &&
              static_cast<int>(ActivationKind::kGeluTanh) == 1 &&
              static_cast<int>(ActivationKind::kSilu) == 2 &&
              static_cast<int>(ActivationKind::kTanh) == 3 &&
              static_cast<int>(ActivationKind::kSigmoid) == 4 &&
              static_cast<int>(ActivationKind::kLeakyRelu) == 5 &&
              static_cast<int>(ActivationKind::kRelu6) == 6 &&
              static_cast<int>(ActivationKind::kHardsigmoid) == 7 &&
              static_cast<int>(ActivationKind::kHardswish) == 8);

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

absl::Status CheckKind(absl::string_view op, ActivationKind kind) {
  const int k = static_cast<int>(kind);
  if (k < 0 || k > static_cast<int>(ActivationKind::kHardswish)) {
    return Invalid(op, absl::StrCat("unknown activation ", k));
  }
  return absl::OkStatus();
}

absl::Status CheckNorm(absl::string_view op, const NormGeometry& g) {
  if (g.rows < 0 || g.groups < 1 || g.row_size < 1 || g.inner < 1 ||
      g.row_size % g.inner != 0 || g.rows % g.groups != 0 ||
      (g.per_element && g.groups != 1)) {
    return Invalid(op, absl::StrCat("inconsistent geometry: rows ", g.rows,
                                    ", groups ", g.groups, ", row_size ",
                                    g.row_size, ", inner ", g.inner));
  }
  return absl::OkStatus();
}

absl::Status CheckPool(absl::string_view op, const Pool1dShape& s) {
  if (s.planes < 0 || s.in_l < 1 || s.kernel < 1 || s.stride < 1 ||
      s.padding < 0 || 2 * s.padding > s.kernel ||
      s.in_l + 2 * s.padding < s.kernel ||
      s.out_l != (s.in_l + 2 * s.padding - s.kernel) / s.stride + 1 ||
      s.in_l > INT32_MAX) {
    return Invalid(
        op, absl::StrCat("inconsistent geometry: in ", s.in_l, ", out ",
                         s.out_l, ", kernel ", s.kernel, ", stride ", s.stride,
                         ", padding ", s.padding));
  }
  return absl::OkStatus();
}

internal::NormArgs Args(const NormGeometry& g) {
  return {g.rows, g.groups, g.row_size, g.inner, g.per_element};
}
internal::Pool1dArgs Args(const Pool1dShape& s) {
  return {s.planes, s.in_l, s.out_l, s.kernel, s.stride, s.padding};
}

}  // namespace

absl::Status ActivationForward(ActivationKind kind, float slope,
                               const float* in, float* out, int64_t n,
                               cudaStream_t stream) {
  constexpr absl::string_view kOp = "activation_forward";
  RETURN_IF_ERROR(CheckKind(kOp, kind));
  if (n < 0) return Invalid(kOp, "negative element count");
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"in", in}, {"out", out}}));
  internal::LaunchActivationForward(static_cast<int>(kind), slope, in, out, n,
                                    stream);
  return LaunchStatus(kOp);
}

absl::Status ActivationBackward(ActivationKind kind, float slope,
                                const float* in, const float* grad_out,
                                float* grad_in, int64_t n,
                                cudaStream_t stream) {
  constexpr absl::string_view kOp = "activation_backward";
  RETURN_IF_ERROR(CheckKind(kOp, kind));
  if (n < 0) return Invalid(kOp, "negative element count");
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"in", in}, {"grad_out", grad_out}, {"grad_in", grad_in}}));
  internal::LaunchActivationBackward(static_cast<int>(kind), slope, in,
                                     grad_out, grad_in, n, stream);
  return LaunchStatus(kOp);
}

absl::Status NormForward(const NormGeometry& g, float eps, const float* x,
                         const float* weight, const float* bias, float* y,
                         float* mean, float* invstd, cudaStream_t stream) {
  constexpr absl::string_view kOp = "norm_forward";
  RETURN_IF_ERROR(CheckNorm(kOp, g));
  if (!(eps > 0)) return Invalid(kOp, absl::StrCat("eps ", eps, " is not > 0"));
  if (g.rows == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"x", x}, {"y", y}, {"mean", mean}, {"invstd", invstd}}));
  if ((weight == nullptr) != (bias == nullptr)) {
    return Invalid(kOp, "weight and bias must both be given or both be null");
  }
  internal::LaunchNormForward(Args(g), eps, x, weight, bias, y, mean, invstd,
                              stream);
  return LaunchStatus(kOp);
}

absl::Status NormBackward(const NormGeometry& g, const float* x,
                          const float* dy, const float* weight,
                          const float* mean, const float* invstd, float* dx,
                          float* weight_grad, float* bias_grad,
                          cudaStream_t stream) {
  constexpr absl::string_view kOp = "norm_backward";
  RETURN_IF_ERROR(CheckNorm(kOp, g));
  if (g.rows == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"x", x}, {"dy", dy}, {"mean", mean}, {"invstd", invstd}}));
  if (weight != nullptr) {
    RETURN_IF_ERROR(CheckPointers(
        kOp, {{"weight_grad", weight_grad}, {"bias_grad", bias_grad}}));
  }
  internal::LaunchNormBackward(Args(g), x, dy, weight, mean, invstd, dx,
                               weight_grad, bias_grad, stream);
  return LaunchStatus(kOp);
}

absl::Status MaxPool1dForward(const Pool1dShape& s, const float* in, float* out,
                              int32_t* argmax, cudaStream_t stream) {
  constexpr absl::string_view kOp = "maxpool1d_forward";
  RETURN_IF_ERROR(CheckPool(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"in", in}, {"out", out}, {"argmax", argmax}}));
  internal::LaunchMaxPool1dForward(Args(s), in, out, argmax, stream);
  return LaunchStatus(kOp);
}

absl::Status MaxPool1dBackward(const Pool1dShape& s, const float* grad_out,
                               const int32_t* argmax, float* grad_in,
                               cudaStream_t stream) {
  constexpr absl::string_view kOp = "maxpool1d_backward";
  RETURN_IF_ERROR(CheckPool(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"grad_out", grad_out}, {"argmax", argmax}, {"grad_in", grad_in}}));
  internal::LaunchMaxPool1dBackward(Args(s), grad_out, argmax, grad_in, stream);
  return LaunchStatus(kOp);
}

absl::Status AvgPool1dForward(const Pool1dShape& s, const float* in, float* out,
                              cudaStream_t stream) {
  constexpr absl::string_view kOp = "avgpool1d_forward";
  RETURN_IF_ERROR(CheckPool(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"in", in}, {"out", out}}));
  internal::LaunchAvgPool1dForward(Args(s), in, out, stream);
  return LaunchStatus(kOp);
}

absl::Status AvgPool1dBackward(const Pool1dShape& s, const float* grad_out,
                               float* grad_in, cudaStream_t stream) {
  constexpr absl::string_view kOp = "avgpool1d_backward";
  RETURN_IF_ERROR(CheckPool(kOp, s));
  if (s.planes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"grad_out", grad_out}, {"grad_in", grad_in}}));
  internal::LaunchAvgPool1dBackward(Args(s), grad_out, grad_in, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
