#include "worker/gpu/layers/gpu_linear.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;
using gpu_layers::ToBf16;
using gpu_layers::ToBf16Scratch;

std::string GpuLinear::Name() const {
  return absl::StrCat("linear(", in_, "->", out_,
                      per_position_ ? ", per position" : "",
                      bf16_ ? ", bf16)" : ")");
}

absl::StatusOr<Shape> GpuLinear::ConfigurePerPosition(const Shape& in) {
  if (out_ < 1 || in.size() != 2 || in[0] < 1 || in[1] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": per_position expects a sequence {C, L} but got ",
        ShapeString(in)));
  }
  in_ = in[0];
  position_ = std::make_unique<GpuConv>(out_, 1, 1, 0, bias_, true, bf16_);
  return position_->Configure(in);
}

absl::StatusOr<Shape> GpuLinear::Configure(const Shape& in) {
  if (per_position_) return ConfigurePerPosition(in);
  if (out_ < 1 || in.size() != 1 || in[0] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": expects a flat input {features} but got ",
                     ShapeString(in), "; put a flatten layer before it"));
  }
  in_ = in[0];
  return Shape{out_};
}

std::vector<int64_t> GpuLinear::ParamSizes() const {
  if (bias_) return {out_ * in_, out_};
  return {out_ * in_};
}

void GpuLinear::Bind(const std::vector<float*>& v,
                     const std::vector<float*>& g) {
  if (position_ != nullptr) return position_->Bind(v, g);
  w_ = v[0];
  dw_ = g[0];
  if (bias_) {
    b_ = v[1];
    db_ = g[1];
  }
}

absl::Status GpuLinear::Forward(GpuContext& c, const float* in, float* out,
                                int64_t n, Mode mode) {
  if (position_ != nullptr) return position_->Forward(c, in, out, n, mode);
  in_ptr_ = in;
  n_ = n;
  if (bf16_) {
    RETURN_IF_ERROR(ToBf16(c, in, n * in_, x16_));
    RETURN_IF_ERROR(ToBf16(c, w_, out_ * in_, w16_));
    RETURN_IF_ERROR(Gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_,
                         w16_.halves(), in_, x16_.halves(), in_, out, out_,
                         "linear forward"));
  } else {
    RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_, &kOne,
                    w_, in_, in, in_, &kZero, out, out_),
        "linear forward"));
  }
  if (!bias_) return absl::OkStatus();
  ASSIGN_OR_RETURN(const float* ones, c.Ones(n));
  return CublasStatus(
      cublasSger(c.cublas(), out_, n, &kOne, b_, 1, ones, 1, out, out_),
      "linear bias");
}

absl::Status GpuLinear::Backward(GpuContext& c, const float* dy, float* dx) {
  if (position_ != nullptr) return position_->Backward(c, dy, dx);
  if (bias_) {
    ASSIGN_OR_RETURN(const float* ones, c.Ones(n_));
    RETURN_IF_ERROR(
        CublasStatus(cublasSgemv(c.cublas(), CUBLAS_OP_N, out_, n_, &kOne, dy,
                                 out_, ones, 1, &kZero, db_, 1),
                     "linear bias gradient"));
  }
  if (bf16_) return BackwardBf16(c, dy, dx);
  RETURN_IF_ERROR(CublasStatus(
      cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, &kOne,
                  in_ptr_, in_, dy, out_, &kZero, dw_, in_),
      "linear weight gradient"));
  if (dx == nullptr) return absl::OkStatus();
  return CublasStatus(
      cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, &kOne,
                  w_, in_, dy, out_, &kZero, dx, in_),
      "linear input gradient");
}

absl::Status GpuLinear::Gemm(GpuContext& c, cublasOperation_t ta,
                             cublasOperation_t tb, int64_t m, int64_t n,
                             int64_t k, const uint16_t* a, int64_t lda,
                             const uint16_t* b, int64_t ldb, float* out,
                             int64_t ldc, absl::string_view what) {
  return CublasStatus(
      cublasGemmEx(c.cublas_lowp(), ta, tb, m, n, k, &kOne, a, CUDA_R_16BF, lda,
                   b, CUDA_R_16BF, ldb, &kZero, out, CUDA_R_32F, ldc,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      what);
}

absl::Status GpuLinear::BackwardBf16(GpuContext& c, const float* dy,
                                     float* dx) {
  ASSIGN_OR_RETURN(const uint16_t* dy16,
                   ToBf16Scratch(c, dy, n_ * out_, GpuContext::Slot::kLowpA));
  RETURN_IF_ERROR(Gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_,
                       x16_.halves(), in_, dy16, out_, dw_, in_,
                       "linear weight gradient"));
  if (dx == nullptr) return absl::OkStatus();
  return Gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, w16_.halves(), in_,
              dy16, out_, dx, in_, "linear input gradient");
}

}  // namespace cohort
