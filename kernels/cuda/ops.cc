#include "kernels/cuda/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/dropout_rng.h"
#include "kernels/cuda/ops_launch.h"

namespace cohort {
namespace gpu {
namespace {

namespace internal = ops_internal;

// ops.cu receives the enums as these ints.
static_assert(static_cast<int>(BiasLayout::kPerColumn) == 0 &&
              static_cast<int>(BiasLayout::kPerRow) == 1);
static_assert(static_cast<int>(Activation::kIdentity) == 0 &&
              static_cast<int>(Activation::kRelu) == 1);

absl::Status CheckCount(absl::string_view op, int64_t n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": element count ", n, " is negative"));
  }
  return absl::OkStatus();
}

// Every named pointer must be non-null (checked only when there is work).
absl::Status CheckPointers(
    absl::string_view op,
    std::initializer_list<std::pair<absl::string_view, const void*>> ptrs) {
  for (const auto& [name, ptr] : ptrs) {
    if (ptr == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " is null"));
    }
  }
  return absl::OkStatus();
}

// Checks a {rows, cols} activation shape; sets *n to rows * cols.
absl::Status CheckShape(absl::string_view op, int64_t rows, int64_t cols,
                        int64_t* n) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": shape {", rows, ", ", cols, "} has a negative dimension"));
  }
  if (rows > 0 && cols > INT64_MAX / rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": shape {", rows, ", ", cols, "} overflows 64-bit sizes"));
  }
  *n = rows * cols;
  return absl::OkStatus();
}

absl::Status CheckEnums(absl::string_view op, BiasLayout layout,
                        Activation act) {
  if (layout != BiasLayout::kPerColumn && layout != BiasLayout::kPerRow) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": unknown bias layout ", static_cast<int>(layout)));
  }
  if (act != Activation::kIdentity && act != Activation::kRelu) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": unknown activation ", static_cast<int>(act)));
  }
  return absl::OkStatus();
}

// Written so that NaN fails too.
absl::Status CheckDropoutP(absl::string_view op, double p) {
  if (!(p >= 0.0 && p < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": probability p must be in [0, 1), got ", p));
  }
  return absl::OkStatus();
}

// The shared body of the four casts.
template <typename In, typename Out>
absl::Status Cast(absl::string_view op, const In* in, Out* out, int64_t n,
                  void (*launch)(const In*, Out*, int64_t, cudaStream_t),
                  cudaStream_t stream) {
  RETURN_IF_ERROR(CheckCount(op, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(op, {{"in", in}, {"out", out}}));
  launch(in, out, n, stream);
  return LaunchStatus(op);
}

}  // namespace

absl::Status SgdStep(float* params, const float* grads, float* momentum_buffer,
                     int64_t n, double lr, const SgdOptions& options,
                     cudaStream_t stream) {
  constexpr absl::string_view kOp = "sgd_step";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"params", params}, {"grads", grads}}));
  // Rounded to float exactly as Sgd<float> stores them.
  const float mu = static_cast<float>(options.momentum);
  if (mu != 0 && momentum_buffer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": momentum ", options.momentum, " needs a momentum buffer"));
  }
  internal::LaunchSgd(params, grads, mu != 0 ? momentum_buffer : nullptr, n,
                      static_cast<float>(lr),
                      static_cast<float>(options.weight_decay), mu,
                      options.nesterov, stream);
  return LaunchStatus(kOp);
}

absl::Status AdamStep(float* params, const float* grads, float* m, float* v,
                      int64_t n, double lr, int64_t step,
                      const AdamOptions& options, cudaStream_t stream) {
  constexpr absl::string_view kOp = "adam_step";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": step ", step, " must count this step (1 on the first)"));
  }
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"params", params}, {"grads", grads}, {"m", m}, {"v", v}}));
  internal::LaunchAdam(
      params, grads, m, v, n,
      MakeAdamScalars<float>(lr, static_cast<double>(step), options), stream);
  return LaunchStatus(kOp);
}

absl::Status RmspropStep(float* params, const float* grads, float* square_avg,
                         float* momentum_buffer, float* grad_avg, int64_t n,
                         double lr, const RmspropOptions& options,
                         cudaStream_t stream) {
  constexpr absl::string_view kOp = "rmsprop_step";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"params", params}, {"grads", grads}, {"square_avg", square_avg}}));
  if (options.momentum > 0) {
    RETURN_IF_ERROR(CheckPointers(kOp, {{"momentum_buffer", momentum_buffer}}));
  }
  if (options.centered) {
    RETURN_IF_ERROR(CheckPointers(kOp, {{"grad_avg", grad_avg}}));
  }
  internal::LaunchRmsprop(
      params, grads, square_avg,
      options.momentum > 0 ? momentum_buffer : nullptr,
      options.centered ? grad_avg : nullptr, n, static_cast<float>(lr),
      static_cast<float>(options.weight_decay),
      static_cast<float>(options.alpha), static_cast<float>(options.eps),
      static_cast<float>(options.momentum), stream);
  return LaunchStatus(kOp);
}

void PieceTableArrays(const RuleLayout& whole, std::vector<int64_t>* pieces,
                      std::vector<int64_t>* tensor_pieces) {
  pieces->clear();
  tensor_pieces->assign(whole.num_tensors + 1, 0);
  for (const Segment& s : whole.segments) {
    pieces->insert(pieces->end(), {s.begin, s.end, s.tensor, s.decay ? 1 : 0});
    (*tensor_pieces)[s.tensor + 1] = s.piece + 1;
  }
  // Tensors without pieces (none in a model: every tensor has elements)
  // start where the previous one ended.
  for (int32_t t = 1; t <= whole.num_tensors; ++t) {
    (*tensor_pieces)[t] =
        std::max((*tensor_pieces)[t], (*tensor_pieces)[t - 1]);
  }
}

namespace {

absl::Status CheckTable(absl::string_view op, const PieceTable& t) {
  if (t.num_pieces < 0 || t.num_tensors < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": piece table has ",
                                                   t.num_pieces, " pieces and ",
                                                   t.num_tensors, " tensors"));
  }
  if (t.num_pieces == 0) return absl::OkStatus();
  return CheckPointers(op, {{"pieces", t.pieces},
                            {"tensor_pieces", t.tensor_pieces},
                            {"sums", t.sums},
                            {"totals", t.totals}});
}

internal::Pieces PiecesOf(const PieceTable& t) {
  return {t.pieces,      t.tensor_pieces, t.num_pieces,
          t.num_tensors, t.sums,          t.totals};
}

}  // namespace

absl::Status LambStep(float* params, const float* grads, float* m, float* v,
                      double lr, int64_t step, const LambOptions& options,
                      const PieceTable& table, cudaStream_t stream) {
  constexpr absl::string_view kOp = "lamb_step";
  RETURN_IF_ERROR(CheckTable(kOp, table));
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": step ", step, " must count this step (1 on the first)"));
  }
  if (table.num_pieces == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(
      kOp, {{"params", params}, {"grads", grads}, {"m", m}, {"v", v}}));
  const double t = static_cast<double>(step);
  internal::LambScalars s;
  // As the CPU rule rounds them (kernels/update_rules.cc, Lamb).
  s.beta1 = static_cast<float>(options.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - options.beta1);
  s.beta2 = static_cast<float>(options.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - options.beta2);
  s.inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(options.beta1, t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options.beta2, t)));
  s.eps = static_cast<float>(options.eps);
  s.weight_decay = static_cast<float>(options.weight_decay);
  internal::LaunchLamb(params, grads, m, v, s, static_cast<float>(lr),
                       PiecesOf(table), stream);
  return LaunchStatus(kOp);
}

absl::Status LarsStep(float* params, const float* grads, float* momentum_buffer,
                      double lr, const LarsOptions& options,
                      const PieceTable& table, cudaStream_t stream) {
  constexpr absl::string_view kOp = "lars_step";
  RETURN_IF_ERROR(CheckTable(kOp, table));
  if (table.num_pieces == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"params", params}, {"grads", grads}}));
  const float mu = static_cast<float>(options.momentum);
  if (mu != 0 && momentum_buffer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": momentum ", options.momentum, " needs a momentum buffer"));
  }
  internal::LarsScalars s{mu, options.weight_decay, options.trust_coefficient};
  internal::LaunchLars(params, grads, mu != 0 ? momentum_buffer : nullptr, s,
                       lr, PiecesOf(table), stream);
  return LaunchStatus(kOp);
}

absl::Status ScaleInPlace(float* y, int64_t n, float scale,
                          cudaStream_t stream) {
  constexpr absl::string_view kOp = "scale_in_place";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"y", y}}));
  internal::LaunchScale(y, n, scale, stream);
  return LaunchStatus(kOp);
}

absl::Status SumScaled(const float* const* inputs, int k, int64_t n,
                       float scale, float* out, cudaStream_t stream) {
  constexpr absl::string_view kOp = "sum_scaled";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  if (k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": needs at least one input, got ", k));
  }
  if (inputs == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": the array of inputs is null"));
  }
  if (n == 0) return absl::OkStatus();
  if (out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": out is null"));
  }
  for (int j = 0; j < k; ++j) {
    if (inputs[j] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": input ", j, " of ", k, " is null"));
    }
    // A later chunk's input equal to `out` would be read after the first
    // chunk overwrote it; only inputs[0] is allowed as the destination.
    if (j > 0 && inputs[j] == out) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": out is input ", j, "; only input 0 may be the output"));
    }
  }
  // Chunks of kMaxSumInputs, each adding onto the previous partial sum:
  // the same left-to-right float additions as one pass, scaled at the end.
  for (int first = 0; first < k; first += internal::kMaxSumInputs) {
    internal::SumInputs chunk;
    chunk.count = std::min(k - first, internal::kMaxSumInputs);
    for (int j = 0; j < chunk.count; ++j) chunk.ptr[j] = inputs[first + j];
    const bool last = first + chunk.count == k;
    internal::LaunchSum(chunk, /*accumulate=*/first > 0, last ? scale : 1.0f,
                        out, n, stream);
    RETURN_IF_ERROR(LaunchStatus(kOp));
  }
  return absl::OkStatus();
}

absl::Status BiasActivationForward(const float* x, const float* bias,
                                   int64_t rows, int64_t cols,
                                   BiasLayout layout, Activation act, float* y,
                                   cudaStream_t stream) {
  constexpr absl::string_view kOp = "bias_activation_forward";
  int64_t n = 0;
  RETURN_IF_ERROR(CheckShape(kOp, rows, cols, &n));
  RETURN_IF_ERROR(CheckEnums(kOp, layout, act));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"x", x}, {"y", y}}));
  internal::LaunchBiasActivationForward(x, bias, rows, cols,
                                        static_cast<int>(layout),
                                        static_cast<int>(act), y, stream);
  return LaunchStatus(kOp);
}

absl::Status BiasActivationBackward(const float* y, const float* dy,
                                    int64_t rows, int64_t cols,
                                    BiasLayout layout, Activation act,
                                    float* dx, float* bias_grad,
                                    cudaStream_t stream) {
  constexpr absl::string_view kOp = "bias_activation_backward";
  int64_t n = 0;
  RETURN_IF_ERROR(CheckShape(kOp, rows, cols, &n));
  RETURN_IF_ERROR(CheckEnums(kOp, layout, act));
  if (n == 0) {
    // Sums over nothing: the bias gradient is zero (if it has elements).
    const int64_t bias_size = layout == BiasLayout::kPerRow ? rows : cols;
    if (bias_grad == nullptr || bias_size == 0) return absl::OkStatus();
    return CudaStatus(
        cudaMemsetAsync(bias_grad, 0, bias_size * sizeof(float), stream),
        absl::StrCat(kOp, ": zeroing the bias gradient"));
  }
  RETURN_IF_ERROR(CheckPointers(kOp, {{"y", y}, {"dy", dy}, {"dx", dx}}));
  internal::LaunchBiasActivationBackward(
      y, dy, rows, cols, static_cast<int>(layout), static_cast<int>(act), dx,
      bias_grad, stream);
  return LaunchStatus(kOp);
}

absl::Status FloatToBf16(const float* in, uint16_t* out, int64_t n,
                         cudaStream_t stream) {
  return Cast("float_to_bf16", in, out, n, &internal::LaunchFloatToBf16,
              stream);
}

absl::Status Bf16ToFloat(const uint16_t* in, float* out, int64_t n,
                         cudaStream_t stream) {
  return Cast("bf16_to_float", in, out, n, &internal::LaunchBf16ToFloat,
              stream);
}

absl::Status FloatToFp16(const float* in, uint16_t* out, int64_t n,
                         cudaStream_t stream) {
  return Cast("float_to_fp16", in, out, n, &internal::LaunchFloatToFp16,
              stream);
}

absl::Status Fp16ToFloat(const uint16_t* in, float* out, int64_t n,
                         cudaStream_t stream) {
  return Cast("fp16_to_float", in, out, n, &internal::LaunchFp16ToFloat,
              stream);
}

absl::Status DropoutForward(const float* in, float* out, uint8_t* mask,
                            int64_t n, double p, uint64_t seed, uint64_t offset,
                            cudaStream_t stream) {
  constexpr absl::string_view kOp = "dropout_forward";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  RETURN_IF_ERROR(CheckDropoutP(kOp, p));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointers(kOp, {{"in", in}, {"out", out}}));
  internal::LaunchDropout(in, out, mask, n, DropoutThreshold(p),
                          static_cast<float>(1.0 / (1.0 - p)), seed, offset,
                          stream);
  return LaunchStatus(kOp);
}

absl::Status DropoutBackward(const float* grad_out, float* grad_in, int64_t n,
                             double p, uint64_t seed, uint64_t offset,
                             cudaStream_t stream) {
  constexpr absl::string_view kOp = "dropout_backward";
  RETURN_IF_ERROR(CheckCount(kOp, n));
  RETURN_IF_ERROR(CheckDropoutP(kOp, p));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckPointers(kOp, {{"grad_out", grad_out}, {"grad_in", grad_in}}));
  internal::LaunchDropout(
      grad_out, grad_in, /*mask=*/nullptr, n, DropoutThreshold(p),
      static_cast<float>(1.0 / (1.0 - p)), seed, offset, stream);
  return LaunchStatus(kOp);
}

}  // namespace gpu
}  // namespace cohort
