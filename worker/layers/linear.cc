#include "worker/layers/linear.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace cohort {

template <typename T>
Linear<T>::Linear(int64_t out_features, bool bias, bool per_position)
    : out_features_(out_features),
      has_bias_(bias),
      per_position_(per_position) {}

template <typename T>
std::string Linear<T>::Name() const {
  return absl::StrCat("linear(",
                      in_features_ > 0 ? absl::StrCat(in_features_) : "?", "->",
                      out_features_, has_bias_ ? "" : ", no bias",
                      per_position_ ? ", per position" : "", ")");
}

template <typename T>
absl::StatusOr<Shape> Linear<T>::Configure(const Shape& in) {
  if (out_features_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": out_features must be positive, got ", out_features_));
  }
  if (per_position_) {
    if (in.size() != 2 || in[0] <= 0 || in[1] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": per_position expects a sequence [C, L] but got ",
          ShapeString(in)));
    }
    in_features_ = in[0];
    length_ = in[1];
    return Shape{out_features_, length_};
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
  input_ = mode == Mode::kTrain ? &in : nullptr;
  if (per_position_) return ForwardPerPosition(in, out);
  CHECK(in.rank() == 2 && in.dim(1) == in_features_)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(0);
  EnsureShape(out, {n, out_features_});
  if (has_bias_) {
    BroadcastRow<T>(n, out_features_, bias_.data(), out->data(), out_features_);
  }
  Gemm<T>(Trans::kNo, Trans::kYes, n, out_features_, in_features_, T(1),
          in.data(), in_features_, weight_.data(), in_features_,
          has_bias_ ? T(1) : T(0), out->data(), out_features_);
}

template <typename T>
void Linear<T>::Backward(const BasicTensor<T>& grad_out,
                         BasicTensor<T>* grad_in) {
  CHECK(input_ != nullptr) << Name() << ": Backward without a kTrain Forward";
  if (per_position_) return BackwardPerPosition(grad_out, grad_in);
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
  EnsureShape(grad_in, {n, in_features_});
  Gemm<T>(Trans::kNo, Trans::kNo, n, in_features_, out_features_, T(1),
          grad_out.data(), out_features_, weight_.data(), in_features_, T(0),
          grad_in->data(), in_features_);
}

// The batch-inner layout puts every position of every sample in one
// column of a {C, N * L} matrix, so the whole batch is one product with
// the weight on the left (what a kernel-1 conv1d computes, without its
// dispatch).
template <typename T>
void Linear<T>::ForwardPerPosition(const BasicTensor<T>& in,
                                   BasicTensor<T>* out) {
  CHECK(in.rank() == 3 && in.dim(0) == in_features_ && in.dim(2) == length_)
      << Name() << ": input " << ShapeString(in.shape())
      << " is not [C, N, L] for the configured [C, L]";
  const int64_t n = in.dim(1);
  EnsureShape(out, {out_features_, n, length_});
  PositionwiseLinear<T>(weight_.data(), has_bias_ ? bias_.data() : nullptr,
                        in.data(), out_features_, in_features_, n * length_,
                        out->data());
}

template <typename T>
void Linear<T>::BackwardPerPosition(const BasicTensor<T>& grad_out,
                                    BasicTensor<T>* grad_in) {
  const int64_t cols = input_->dim(1) * length_;
  CHECK(grad_out.rank() == 3 && grad_out.dim(0) == out_features_ &&
        grad_out.dim(1) == input_->dim(1) && grad_out.dim(2) == length_)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  if (grad_in != nullptr) EnsureShape(grad_in, input_->shape());
  PositionwiseLinearBackward<T>(weight_.data(), input_->data(), grad_out.data(),
                                out_features_, in_features_, cols,
                                grad_weight_.data(),
                                has_bias_ ? grad_bias_.data() : nullptr,
                                grad_in != nullptr ? grad_in->data() : nullptr);
}

template class Linear<float>;
template class Linear<double>;

}  // namespace cohort
