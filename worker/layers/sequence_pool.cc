#include "worker/layers/sequence_pool.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/pool.h"

namespace cohort {

template <typename T>
absl::StatusOr<Shape> SequencePool<T>::Configure(const Shape& in) {
  if (in.size() != 2 || NumElements(in) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expected a non-empty sequence [D, L] per sample, got ",
        ShapeString(in)));
  }
  length_ = in[1];
  return Shape{in[0]};
}

template <typename T>
void SequencePool<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                              Mode mode) {
  CHECK(in.rank() == 3 && in.dim(2) == length_)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured length " << length_;
  in_shape_ = in.shape();  // reuses its capacity: no allocation per step
  const int64_t d = in.dim(0), n = in.dim(1);
  EnsureShape(out, {n, d});
  GlobalAvgPoolForward(d, n, length_, in.data(), out->data());
}

template <typename T>
void SequencePool<T>::Backward(const BasicTensor<T>& grad_out,
                               BasicTensor<T>* grad_in) {
  const int64_t d = in_shape_[0], n = in_shape_[1];
  CHECK_EQ(grad_out.size(), d * n);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_shape_);
  GlobalAvgPoolBackward(d, n, length_, grad_out.data(), grad_in->data());
}

template class SequencePool<float>;
template class SequencePool<double>;

}  // namespace cohort
