#include "kernels/cuda/sequence_ops.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sequence_ops_launch.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = sequence_ops_internal;

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

absl::Status CheckShape(absl::string_view op, const SequenceShape& s) {
  if (s.n < 0 || s.d < 1 || s.l < 1) {
    return Invalid(op, absl::StrCat("bad sequence shape: n ", s.n, ", d ", s.d,
                                    ", l ", s.l));
  }
  return absl::OkStatus();
}

absl::Status CheckVocab(absl::string_view op, int64_t vocab) {
  // Ids travel as floats: exact below 2^24.
  if (vocab < 1 || vocab > (int64_t{1} << 24)) {
    return Invalid(op,
                   absl::StrCat("vocabulary ", vocab, " is outside [1, 2^24]"));
  }
  return absl::OkStatus();
}

internal::SeqArgs Args(const SequenceShape& s) { return {s.n, s.d, s.l}; }

}  // namespace

absl::Status EmbeddingForward(const SequenceShape& s, int64_t vocab,
                              const float* ids, const float* weight, float* out,
                              cudaStream_t stream) {
  constexpr absl::string_view kOp = "embedding_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  RETURN_IF_ERROR(CheckVocab(kOp, vocab));
  if (s.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"ids", ids}, {"weight", weight}, {"out", out}}));
  internal::LaunchEmbeddingForward(Args(s), vocab, ids, weight, out, stream);
  return LaunchStatus(kOp);
}

size_t EmbeddingBackwardWorkspaceBytes(int64_t positions, int64_t vocab) {
  if (positions < 1 || vocab < 1) return 0;
  return internal::EmbeddingSortBytes(positions, vocab);
}

absl::Status EmbeddingBackward(const SequenceShape& s, int64_t vocab,
                               const float* ids, const float* grad_out,
                               float* grad_weight, bool accumulate,
                               void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  constexpr absl::string_view kOp = "embedding_backward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  RETURN_IF_ERROR(CheckVocab(kOp, vocab));
  if (s.n * s.l > INT32_MAX) {
    return Invalid(kOp, absl::StrCat(s.n * s.l, " positions are over 2^31"));
  }
  RETURN_IF_ERROR(CheckPointers(kOp, {{"grad_weight", grad_weight}}));
  if (!accumulate) {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemsetAsync(grad_weight, 0, vocab * s.d * sizeof(float), stream),
        absl::StrCat(kOp, ": clearing the gradient")));
  }
  if (s.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"ids", ids}, {"grad_out", grad_out}}));
  const size_t need = EmbeddingBackwardWorkspaceBytes(s.n * s.l, vocab);
  if (workspace == nullptr || workspace_bytes < need ||
      reinterpret_cast<uintptr_t>(workspace) % 8 != 0) {
    return Invalid(kOp, absl::StrCat("workspace of ", workspace_bytes,
                                     " bytes; needs ", need, ", 8-aligned"));
  }
  RETURN_IF_ERROR(CudaStatus(internal::LaunchEmbeddingScatter(
                                 Args(s), vocab, ids, grad_out, grad_weight,
                                 workspace, workspace_bytes, stream),
                             absl::StrCat(kOp, ": sorting the ids")));
  return LaunchStatus(kOp);
}

absl::Status PositionalForward(const SequenceShape& s, const float* in,
                               const float* weight, float* out,
                               cudaStream_t stream) {
  constexpr absl::string_view kOp = "positional_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (s.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"in", in}, {"weight", weight}, {"out", out}}));
  internal::LaunchPositionalForward(Args(s), in, weight, out, stream);
  return LaunchStatus(kOp);
}

absl::Status PositionalWeightGrad(const SequenceShape& s, const float* grad_out,
                                  float* grad_weight, cudaStream_t stream) {
  constexpr absl::string_view kOp = "positional_weight_grad";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  RETURN_IF_ERROR(CheckPointers(kOp, {{"grad_weight", grad_weight}}));
  if (s.n == 0) {
    return CudaStatus(
        cudaMemsetAsync(grad_weight, 0, s.l * s.d * sizeof(float), stream),
        absl::StrCat(kOp, ": clearing the gradient"));
  }
  RETURN_IF_ERROR(CheckPointers(kOp, {{"grad_out", grad_out}}));
  internal::LaunchPositionalWeightGrad(Args(s), grad_out, grad_weight, stream);
  return LaunchStatus(kOp);
}

absl::Status PositionNormForward(const SequenceShape& s, float eps,
                                 const float* x, const float* weight,
                                 const float* bias, float* y, float* mean,
                                 float* invstd, cudaStream_t stream) {
  constexpr absl::string_view kOp = "position_norm_forward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (!(eps > 0) || !std::isfinite(eps)) {
    return Invalid(kOp, absl::StrCat("eps ", eps, " is not a positive number"));
  }
  if ((weight == nullptr) != (bias == nullptr)) {
    return Invalid(kOp, "weight and bias must both be given or both be null");
  }
  if (s.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"x", x}, {"y", y}, {"mean", mean}, {"invstd", invstd}}));
  internal::LaunchPositionNormForward(Args(s), eps, x, weight, bias, y, mean,
                                      invstd, stream);
  return LaunchStatus(kOp);
}

absl::Status PositionNormBackward(const SequenceShape& s, const float* x,
                                  const float* dy, const float* weight,
                                  const float* mean, const float* invstd,
                                  float* dx, float* weight_grad,
                                  float* bias_grad, cudaStream_t stream) {
  constexpr absl::string_view kOp = "position_norm_backward";
  RETURN_IF_ERROR(CheckShape(kOp, s));
  if (dx != nullptr && dx == dy) return Invalid(kOp, "dx must not be dy");
  if (weight != nullptr) {
    RETURN_IF_ERROR(CheckPointers(
        kOp, {{"weight_grad", weight_grad}, {"bias_grad", bias_grad}}));
  }
  if (s.n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"x", x}, {"dy", dy}, {"mean", mean}, {"invstd", invstd}}));
  internal::LaunchPositionNormBackward(Args(s), x, dy, weight, mean, invstd, dx,
                                       weight_grad, bias_grad, stream);
  return LaunchStatus(kOp);
}

absl::Status FloatTargetsToLabels(const float* targets, int32_t* labels,
                                  int64_t n, cudaStream_t stream) {
  constexpr absl::string_view kOp = "float_targets_to_labels";
  if (n < 0) return Invalid(kOp, "negative element count");
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"targets", targets}, {"labels", labels}}));
  internal::LaunchFloatTargetsToLabels(targets, labels, n, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
