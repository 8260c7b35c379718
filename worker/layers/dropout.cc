#include "worker/layers/dropout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
Dropout<T>::Dropout(double p) : p_(p) {}

template <typename T>
std::string Dropout<T>::Name() const {
  return absl::StrCat("dropout(p=", p_, ")");
}

template <typename T>
absl::StatusOr<Shape> Dropout<T>::Configure(const Shape& in) {
  // Written so that NaN fails too.
  if (!(p_ >= 0.0 && p_ < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout: probability p must be in [0, 1), got ", p_));
  }
  return in;
}

// Each 64-bit draw gives two 32-bit uniforms: half the generator calls of
// one draw per element, with a drop probability exact to 2^-32.
template <typename T>
void Dropout<T>::DrawMask(int64_t n) {
  mask_.resize(n);
  const uint64_t threshold =
      static_cast<uint64_t>(std::ldexp(p_, 32));  // drop when u < threshold
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const uint64_t r = rng_();
    mask_[i] = (r & 0xffffffffu) >= threshold;
    mask_[i + 1] = (r >> 32) >= threshold;
  }
  if (i < n) mask_[i] = (rng_() & 0xffffffffu) >= threshold;
}

template <typename T>
void Dropout<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                         Mode mode) {
  in_shape_ = in.shape();  // reuses its capacity: no allocation per step
  EnsureShape(out, in.shape());
  masked_ = mode == Mode::kTrain && p_ > 0.0;
  if (!masked_) {
    std::copy(in.data(), in.data() + in.size(), out->data());
    return;
  }
  DrawMask(in.size());
  MaskedScale(in.data(), mask_.data(), static_cast<T>(1.0 / (1.0 - p_)),
              out->data(), in.size());
}

template <typename T>
void Dropout<T>::Backward(const BasicTensor<T>& grad_out,
                          BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), NumElements(in_shape_));
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_shape_);
  if (!masked_) {
    std::copy(grad_out.data(), grad_out.data() + grad_out.size(),
              grad_in->data());
    return;
  }
  MaskedScale(grad_out.data(), mask_.data(), static_cast<T>(1.0 / (1.0 - p_)),
              grad_in->data(), grad_out.size());
}

template class Dropout<float>;
template class Dropout<double>;

}  // namespace cohort
