#include "worker/layers/interaction.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/interaction.h"

namespace cohort {

template <typename T>
std::string Interaction<T>::Name() const {
  return absl::StrCat(
      "interaction(", kind_ == InteractionKind::kDot ? "dot" : "cat", ", ",
      vectors_ > 0 ? absl::StrCat(vectors_) : "?", " x ", dim_, ")");
}

template <typename T>
absl::StatusOr<Shape> Interaction<T>::Configure(const Shape& in) {
  if (dim_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": dim must be positive, got ", dim_));
  }
  if (in.size() != 1 || in[0] <= 0 || in[0] % dim_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects a flat input of 1 + T vectors of dim ", dim_,
        " features ({dim (1 + T)}) but got ", ShapeString(in)));
  }
  vectors_ = in[0] / dim_;
  out_features_ = kind_ == InteractionKind::kCat
                      ? in[0]
                      : DotInteractionOutputs(vectors_, dim_);
  return Shape{out_features_};
}

template <typename T>
void Interaction<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                             Mode mode) {
  const int64_t features = vectors_ * dim_;
  CHECK(in.rank() == 2 && in.dim(1) == features)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(0);
  in_ = &in;
  EnsureShape(out, {n, out_features_});
  if (kind_ == InteractionKind::kCat) {
    std::copy(in.data(), in.data() + in.size(), out->data());
    return;
  }
  DotInteractionForward(in.data(), n, vectors_, dim_, out->data());
  (void)mode;
}

template <typename T>
void Interaction<T>::Backward(const BasicTensor<T>& grad_out,
                              BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward without a Forward";
  const int64_t n = in_->dim(0), features = vectors_ * dim_;
  CHECK(grad_out.rank() == 2 && grad_out.dim(0) == n &&
        grad_out.dim(1) == out_features_)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {n, features});
  if (kind_ == InteractionKind::kCat) {
    std::copy(grad_out.data(), grad_out.data() + grad_out.size(),
              grad_in->data());
    return;
  }
  DotInteractionBackward(in_->data(), grad_out.data(), n, vectors_, dim_,
                         grad_in->data());
}

template class Interaction<float>;
template class Interaction<double>;

}  // namespace cohort
