#include "worker/layers/elementwise_activation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

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
  // Elementwise, so ranges on the compute threads give the same bits.
  ParallelRanges(in.size(), kElementwiseGrain, [&](int64_t a, int64_t b) {
    ActivationForward(kind_, static_cast<T>(slope_), in.data() + a,
                      out->data() + a, b - a);
  });
  in_ = &in;
}

template <typename T>
void ElementwiseActivation<T>::Backward(const BasicTensor<T>& grad_out,
                                        BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_->shape());
  ParallelRanges(in_->size(), kElementwiseGrain, [&](int64_t a, int64_t b) {
    ActivationBackward(kind_, static_cast<T>(slope_), in_->data() + a,
                       grad_out.data() + a, grad_in->data() + a, b - a);
  });
}

template class ElementwiseActivation<float>;
template class ElementwiseActivation<double>;

}  // namespace cohort
