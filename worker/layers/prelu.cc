#include "worker/layers/prelu.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
std::string Prelu<T>::Name() const {
  return absl::StrCat("prelu(", num_parameters_, ")");
}

template <typename T>
absl::StatusOr<Shape> Prelu<T>::Configure(const Shape& in) {
  bool fits = !in.empty() && in.size() <= 3;
  for (int64_t d : in) fits = fits && d >= 1;
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expected a non-empty per-sample input [F], [C, L] or ",
        "[C, H, W], got ", ShapeString(in)));
  }
  if (num_parameters_ != 1 && num_parameters_ != in[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": num_parameters must be 1 or the input's channels (", in[0],
        "), got ", num_parameters_));
  }
  sample_ = in;
  return in;
}

template <typename T>
std::vector<ParamDecl> Prelu<T>::Params() const {
  ParamDecl w{"weight", {num_parameters_}, ParamDecl::Init::kConstant};
  w.value = init_;
  return {w};
}

template <typename T>
void Prelu<T>::Bind(std::vector<BasicTensor<T>> values,
                    std::vector<BasicTensor<T>> grads) {
  CHECK_EQ(values.size(), 1u);
  CHECK_EQ(grads.size(), 1u);
  weight_ = std::move(values[0]);
  weight_grad_ = std::move(grads[0]);
}

template <typename T>
PreluGeometry Prelu<T>::Geometry(const BasicTensor<T>& in) const {
  if (num_parameters_ == 1) return {1, 1, in.size()};
  // Dense {N, F}: the slopes run along each row. Batch-inner {C, N, ...}:
  // each channel's (sample, position) block is contiguous.
  if (sample_.size() == 1) return {in.dim(0), in.dim(1), 1};
  return {1, in.dim(0), in.size() / in.dim(0)};
}

template <typename T>
void Prelu<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                       Mode mode) {
  CHECK(in.rank() == static_cast<int>(sample_.size()) + 1 &&
        in.dim(sample_.size() == 1 ? 1 : 0) == sample_[0])
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape "
      << ShapeString(sample_);
  EnsureShape(out, in.shape());
  PreluForward(Geometry(in), in.data(), weight_.data(), out->data());
  in_ = &in;
}

template <typename T>
void Prelu<T>::Backward(const BasicTensor<T>& grad_out,
                        BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  T* dx = nullptr;
  if (grad_in != nullptr) {
    EnsureShape(grad_in, in_->shape());
    dx = grad_in->data();
  }
  PreluBackward(Geometry(*in_), in_->data(), weight_.data(), grad_out.data(),
                dx, weight_grad_.data());
}

template class Prelu<float>;
template class Prelu<double>;

}  // namespace cohort
