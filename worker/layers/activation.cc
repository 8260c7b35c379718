#include "worker/layers/activation.h"

#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
void ReLU<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                      Mode mode) {
  EnsureShape(out, in.shape());
  ReluForward(in.data(), out->data(), in.size());
  in_ = &in;
}

template <typename T>
void ReLU<T>::Backward(const BasicTensor<T>& grad_out,
                       BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << "relu: Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_->shape());
  ReluBackward(in_->data(), grad_out.data(), grad_in->data(), in_->size());
}

template class ReLU<float>;
template class ReLU<double>;

}  // namespace cohort
