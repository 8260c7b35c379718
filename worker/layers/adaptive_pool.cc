#include "worker/layers/adaptive_pool.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
std::string AdaptiveAvgPool2d<T>::Name() const {
  return absl::StrCat("adaptive_avgpool2d(", output_, ")");
}

template <typename T>
absl::StatusOr<Shape> AdaptiveAvgPool2d<T>::Configure(const Shape& in) {
  if (output_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": output must be at least 1, got ", output_));
  }
  if (in.size() != 3 || in[0] < 1 || in[1] < 1 || in[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expected a non-empty per-sample input of shape [C, H, W], ",
        "got ", ShapeString(in)));
  }
  channels_ = in[0];
  geometry_.in_h = in[1];
  geometry_.in_w = in[2];
  geometry_.out_h = geometry_.out_w = output_;
  return Shape{channels_, output_, output_};
}

template <typename T>
void AdaptiveAvgPool2d<T>::Forward(const BasicTensor<T>& in,
                                   BasicTensor<T>* out, Mode mode) {
  CHECK(in.rank() == 4 && in.dim(0) == channels_ &&
        in.dim(2) == geometry_.in_h && in.dim(3) == geometry_.in_w)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape";
  batch_ = in.dim(1);
  geometry_.planes = channels_ * batch_;
  EnsureShape(out, {channels_, batch_, output_, output_});
  AdaptiveAvgPool2dForward(geometry_, in.data(), out->data());
}

template <typename T>
void AdaptiveAvgPool2d<T>::Backward(const BasicTensor<T>& grad_out,
                                    BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), geometry_.planes * output_ * output_);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {channels_, batch_, geometry_.in_h, geometry_.in_w});
  AdaptiveAvgPool2dBackward(geometry_, grad_out.data(), grad_in->data());
}

template class AdaptiveAvgPool2d<float>;
template class AdaptiveAvgPool2d<double>;

}  // namespace cohort
