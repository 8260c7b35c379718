#include "worker/layers/softmax.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
absl::StatusOr<Shape> Softmax<T>::Configure(const Shape& in) {
  bool fits = !in.empty() && in.size() <= 3;
  for (int64_t d : in) fits = fits && d >= 1;
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expected a non-empty per-sample input [F], [C, L] or ",
        "[C, H, W], got ", ShapeString(in)));
  }
  sample_ = in;
  return in;
}

template <typename T>
SoftmaxGeometry Softmax<T>::Geometry(const BasicTensor<T>& in) const {
  // Dense {N, F}: one row per sample. Batch-inner {C, N, ...}: the channels
  // are the outermost axis, every (sample, position) a column.
  if (sample_.size() == 1) return {in.dim(0), in.dim(1), 1};
  return {1, in.dim(0), in.size() / in.dim(0)};
}

template <typename T>
void Softmax<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                         Mode mode) {
  CHECK(in.rank() == static_cast<int>(sample_.size()) + 1 &&
        in.dim(sample_.size() == 1 ? 1 : 0) == sample_[0])
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape "
      << ShapeString(sample_);
  EnsureShape(out, in.shape());
  SoftmaxForward(Geometry(in), in.data(), out->data());
  in_ = &in;
}

template <typename T>
void Softmax<T>::Backward(const BasicTensor<T>& grad_out,
                          BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_->shape());
  SoftmaxBackward(Geometry(*in_), in_->data(), grad_out.data(),
                  grad_in->data());
}

template class Softmax<float>;
template class Softmax<double>;

}  // namespace cohort
