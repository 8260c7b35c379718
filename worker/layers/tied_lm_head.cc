#include "worker/layers/tied_lm_head.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/gemm.h"

namespace cohort {
namespace {

template <typename T>
void EnsureShape(BasicTensor<T>* t, int64_t a, int64_t b, int64_t c) {
  if (t->rank() != 3 || t->dim(0) != a || t->dim(1) != b || t->dim(2) != c) {
    t->Resize({a, b, c});
  }
}

}  // namespace

template <typename T>
std::string TiedLmHead<T>::Name() const {
  if (vocab_ == 0) return "tied_lm_head(?)";
  return absl::StrCat("tied_lm_head(", dim_, "->", vocab_, ")");
}

template <typename T>
void TiedLmHead<T>::SetVocab(int64_t vocab_size, int64_t dim) {
  vocab_ = vocab_size;
  dim_ = dim;
}

template <typename T>
absl::StatusOr<Shape> TiedLmHead<T>::Configure(const Shape& in) {
  if (vocab_ <= 0) {
    return absl::InvalidArgumentError(
        "tied_lm_head needs an embedding layer before it");
  }
  if (in.size() != 2 || in[0] != dim_ || in[1] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects a sequence {", dim_,
        ", L} (the tied embedding's width) but got ", ShapeString(in)));
  }
  return Shape{vocab_, in[1]};
}

template <typename T>
void TiedLmHead<T>::Tie(BasicTensor<T> weight, BasicTensor<T> grad,
                        bool accumulate) {
  CHECK(weight.rank() == 2 && weight.dim(0) == vocab_ &&
        weight.dim(1) == dim_ && grad.shape() == weight.shape())
      << Name() << ": tied to a weight " << ShapeString(weight.shape());
  weight_ = std::move(weight);
  grad_weight_ = std::move(grad);
  accumulate_ = accumulate;
}

template <typename T>
void TiedLmHead<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                            Mode mode) {
  CHECK(weight_.data() != nullptr) << Name() << ": Forward before Tie";
  CHECK(in.rank() == 3 && in.dim(0) == dim_)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t cols = in.dim(1) * in.dim(2);
  EnsureShape(out, vocab_, in.dim(1), in.dim(2));
  // out[V, NL] = E[V, D] x[D, NL]
  Gemm<T>(Trans::kNo, Trans::kNo, vocab_, cols, dim_, T(1), weight_.data(),
          dim_, in.data(), cols, T(0), out->data(), cols);
  input_ = mode == Mode::kTrain ? &in : nullptr;
}

template <typename T>
void TiedLmHead<T>::Backward(const BasicTensor<T>& grad_out,
                             BasicTensor<T>* grad_in) {
  CHECK(input_ != nullptr) << Name() << ": Backward without a kTrain Forward";
  const int64_t cols = input_->dim(1) * input_->dim(2);
  CHECK(grad_out.rank() == 3 && grad_out.dim(0) == vocab_ &&
        grad_out.dim(1) * grad_out.dim(2) == cols)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  // dE[V, D] (+)= dOut[V, NL] x^T[NL, D]
  Gemm<T>(Trans::kNo, Trans::kYes, vocab_, dim_, cols, T(1), grad_out.data(),
          cols, input_->data(), cols, accumulate_ ? T(1) : T(0),
          grad_weight_.data(), dim_);
  if (grad_in == nullptr) return;
  // dx[D, NL] = E^T[D, V] dOut[V, NL]
  EnsureShape(grad_in, dim_, input_->dim(1), input_->dim(2));
  Gemm<T>(Trans::kYes, Trans::kNo, dim_, cols, vocab_, T(1), weight_.data(),
          dim_, grad_out.data(), cols, T(0), grad_in->data(), cols);
}

template class TiedLmHead<float>;
template class TiedLmHead<double>;

}  // namespace cohort
