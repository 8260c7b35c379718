#include "worker/layers/linear.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/gemm.h"

namespace cohort {
namespace {

// Resizes `t` to {rows, cols} unless it already has that shape: building a
// Shape allocates, and this runs every step.
template <typename T>
void EnsureShape(BasicTensor<T>* t, int64_t rows, int64_t cols) {
  if (t->rank() != 2 || t->dim(0) != rows || t->dim(1) != cols) {
    t->Resize({rows, cols});
  }
}

}  // namespace

template <typename T>
Linear<T>::Linear(int64_t out_features, bool bias)
    : out_features_(out_features), has_bias_(bias) {}

template <typename T>
std::string Linear<T>::Name() const {
  return absl::StrCat("linear(",
                      in_features_ > 0 ? absl::StrCat(in_features_) : "?", "->",
                      out_features_, has_bias_ ? "" : ", no bias", ")");
}

template <typename T>
absl::StatusOr<Shape> Linear<T>::Configure(const Shape& in) {
  if (out_features_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": out_features must be positive, got ", out_features_));
  }
  if (in.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": expects a flat input {features} but got ",
                     ShapeString(in), "; put a flatten layer before it"));
  }
  if (in[0] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": input ", ShapeString(in), " has no features"));
  }
  in_features_ = in[0];
  return Shape{out_features_};
}

template <typename T>
std::vector<ParamDecl> Linear<T>::Params() const {
  CHECK_GT(in_features_, 0) << Name() << ": Params() before Configure()";
  std::vector<ParamDecl> params = {{"weight",
                                    {out_features_, in_features_},
                                    ParamDecl::Init::kKaimingUniform,
                                    in_features_}};
  if (has_bias_) {
    params.push_back({"bias",
                      {out_features_},
                      ParamDecl::Init::kFanInUniform,
                      in_features_});
  }
  return params;
}

template <typename T>
void Linear<T>::Bind(std::vector<BasicTensor<T>> values,
                     std::vector<BasicTensor<T>> grads) {
  const size_t n = has_bias_ ? 2 : 1;
  CHECK(values.size() == n && grads.size() == n) << Name() << ": Bind";
  weight_ = std::move(values[0]);
  grad_weight_ = std::move(grads[0]);
  if (has_bias_) {
    bias_ = std::move(values[1]);
    grad_bias_ = std::move(grads[1]);
  }
}

template <typename T>
void Linear<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                        Mode mode) {
  CHECK(in.rank() == 2 && in.dim(1) == in_features_)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(0);
  EnsureShape(out, n, out_features_);
  if (has_bias_) {
    BroadcastRow<T>(n, out_features_, bias_.data(), out->data(), out_features_);
  }
  Gemm<T>(Trans::kNo, Trans::kYes, n, out_features_, in_features_, T(1),
          in.data(), in_features_, weight_.data(), in_features_,
          has_bias_ ? T(1) : T(0), out->data(), out_features_);
  input_ = mode == Mode::kTrain ? &in : nullptr;
}

template <typename T>
void Linear<T>::Backward(const BasicTensor<T>& grad_out,
                         BasicTensor<T>* grad_in) {
  CHECK(input_ != nullptr) << Name() << ": Backward without a kTrain Forward";
  const int64_t n = input_->dim(0);
  CHECK(grad_out.rank() == 2 && grad_out.dim(0) == n &&
        grad_out.dim(1) == out_features_)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  // dW[out, in] = dOut^T[out, N] * x[N, in]
  Gemm<T>(Trans::kYes, Trans::kNo, out_features_, in_features_, n, T(1),
          grad_out.data(), out_features_, input_->data(), in_features_, T(0),
          grad_weight_.data(), in_features_);
  if (has_bias_) {
    ColumnSums<T>(n, out_features_, grad_out.data(), out_features_,
                  grad_bias_.data());
  }
  if (grad_in == nullptr) return;
  // dX[N, in] = dOut[N, out] * W[out, in]
  EnsureShape(grad_in, n, in_features_);
  Gemm<T>(Trans::kNo, Trans::kNo, n, in_features_, out_features_, T(1),
          grad_out.data(), out_features_, weight_.data(), in_features_, T(0),
          grad_in->data(), in_features_);
}

template class Linear<float>;
template class Linear<double>;

}  // namespace cohort
