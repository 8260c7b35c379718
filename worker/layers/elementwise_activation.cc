#include "worker/layers/elementwise_activation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
std::string ElementwiseActivation<T>::Name() const {
  return ActivationName(kind_, slope_);
}

template <typename T>
absl::StatusOr<Shape> ElementwiseActivation<T>::Configure(const Shape& in) {
  if (!std::isfinite(slope_)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": negative_slope must be finite"));
  }
  return in;
}

template <typename T>
void ElementwiseActivation<T>::Forward(const BasicTensor<T>& in,
                                       BasicTensor<T>* out, Mode mode) {
  EnsureShape(out, in.shape());
  ActivationForward(kind_, static_cast<T>(slope_), in.data(), out->data(),
                    in.size());
  in_ = &in;
}

template <typename T>
void ElementwiseActivation<T>::Backward(const BasicTensor<T>& grad_out,
                                        BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_->shape());
  ActivationBackward(kind_, static_cast<T>(slope_), in_->data(),
                     grad_out.data(), grad_in->data(), in_->size());
}

template class ElementwiseActivation<float>;
template class ElementwiseActivation<double>;

}  // namespace cohort
