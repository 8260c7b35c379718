#include "worker/layers/upsample.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
std::string Upsample<T>::Name() const {
  return absl::StrCat(
      "upsample(", scale_,
      mode_ == UpsampleMode::kNearest ? ", nearest)" : ", bilinear)");
}

template <typename T>
absl::StatusOr<Shape> Upsample<T>::Configure(const Shape& in) {
  if (scale_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": scale must be at least 1, got ", scale_));
  }
  if (in.size() != 3 || in[0] < 1 || in[1] < 1 || in[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expected a non-empty per-sample input of shape [C, H, W], ",
        "got ", ShapeString(in)));
  }
  channels_ = in[0];
  geometry_.in_h = in[1];
  geometry_.in_w = in[2];
  geometry_.scale = scale_;
  return Shape{channels_, in[1] * scale_, in[2] * scale_};
}

template <typename T>
void Upsample<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                          Mode mode) {
  CHECK(in.rank() == 4 && in.dim(0) == channels_ &&
        in.dim(2) == geometry_.in_h && in.dim(3) == geometry_.in_w)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape";
  batch_ = in.dim(1);
  geometry_.planes = channels_ * batch_;
  EnsureShape(out, {channels_, batch_, geometry_.in_h * scale_,
                    geometry_.in_w * scale_});
  UpsampleForward(mode_, geometry_, in.data(), out->data());
}

template <typename T>
void Upsample<T>::Backward(const BasicTensor<T>& grad_out,
                           BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), geometry_.planes * geometry_.in_h * geometry_.in_w *
                                scale_ * scale_);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {channels_, batch_, geometry_.in_h, geometry_.in_w});
  UpsampleBackward(mode_, geometry_, grad_out.data(), grad_in->data());
}

template class Upsample<float>;
template class Upsample<double>;

}  // namespace cohort
