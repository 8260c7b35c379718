// ReLU, for every activation layout (it is elementwise).
//
// The layer owns nothing but a pointer to the last forward input, which the
// caller keeps alive until Backward (see layer.h). Thread safety: none; one
// replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_ACTIVATION_H_
#define COHORT_WORKER_LAYERS_ACTIVATION_H_

#include <string>

#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class ReLU : public Layer<T> {
 public:
  ReLU() = default;

  std::string Name() const override { return "relu"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override { return in; }
  FusedActivation fused_activation_kind() const override {
    return FusedActivation::kRelu;
  }
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  // The sign of the input decides the gradient; keeping the input rather
  // than a mask costs no memory traffic in Forward.
  const BasicTensor<T>* in_ = nullptr;
};

extern template class ReLU<float>;
extern template class ReLU<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_ACTIVATION_H_
