#include "worker/layers/slice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
std::string Slice<T>::Name() const {
  return absl::StrCat("slice(", begin_, ", ", end_, ")");
}

template <typename T>
absl::StatusOr<Shape> Slice<T>::Configure(const Shape& in) {
  if (in.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": expects a flat input {F} but got ",
                     ShapeString(in), "; put a flatten layer before it"));
  }
  if (begin_ < 0 || end_ <= begin_ || end_ > in[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": features [", begin_, ", ", end_,
                     ") are not a non-empty range of the input's ", in[0],
                     " (0 <= begin < end <= ", in[0], ")"));
  }
  features_ = in[0];
  return Shape{end_ - begin_};
}

template <typename T>
void Slice<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                       Mode mode) {
  CHECK(in.rank() == 2 && in.dim(1) == features_)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(0), width = end_ - begin_;
  EnsureShape(out, {n, width});
  for (int64_t s = 0; s < n; ++s) {
    const T* row = in.data() + s * features_ + begin_;
    std::copy(row, row + width, out->data() + s * width);
  }
  (void)mode;
}

template <typename T>
void Slice<T>::Backward(const BasicTensor<T>& grad_out,
                        BasicTensor<T>* grad_in) {
  const int64_t width = end_ - begin_;
  CHECK(grad_out.rank() == 2 && grad_out.dim(1) == width)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  if (grad_in == nullptr) return;
  const int64_t n = grad_out.dim(0);
  EnsureShape(grad_in, {n, features_});
  for (int64_t s = 0; s < n; ++s) {
    T* row = grad_in->data() + s * features_;
    const T* g = grad_out.data() + s * width;
    std::fill(row, row + begin_, T(0));
    std::copy(g, g + width, row + begin_);
    std::fill(row + end_, row + features_, T(0));
  }
}

template class Slice<float>;
template class Slice<double>;

}  // namespace cohort
