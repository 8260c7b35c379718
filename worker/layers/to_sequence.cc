#include "worker/layers/to_sequence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
absl::StatusOr<Shape> ToSequence<T>::Configure(const Shape& in) {
  if (in.size() != 3 || NumElements(in) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expected a non-empty per-sample input [C, H, W], got ",
        ShapeString(in)));
  }
  return Shape{in[0], in[1] * in[2]};
}

template <typename T>
void ToSequence<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                            Mode mode) {
  CHECK_EQ(in.rank(), 4) << Name() << ": input " << ShapeString(in.shape());
  in_shape_ = in.shape();  // reuses its capacity: no allocation per step
  EnsureShape(out, {in.dim(0), in.dim(1), in.dim(2) * in.dim(3)});
  std::copy(in.data(), in.data() + in.size(), out->data());
}

template <typename T>
void ToSequence<T>::Backward(const BasicTensor<T>& grad_out,
                             BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), NumElements(in_shape_));
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_shape_);
  std::copy(grad_out.data(), grad_out.data() + grad_out.size(),
            grad_in->data());
}

template class ToSequence<float>;
template class ToSequence<double>;

}  // namespace cohort
