// GELU, SiLU, tanh, sigmoid and LeakyReLU, for every activation layout
// (they are elementwise), with PyTorch's formulas (kernels/activations.h).
//
// The layer owns nothing but a pointer to the last forward input, which the
// caller keeps alive until Backward (see layer.h); backward recomputes the
// derivative from it. Thread safety: none; one replica's thread drives a
// layer.
#ifndef COHORT_WORKER_LAYERS_ELEMENTWISE_ACTIVATION_H_
#define COHORT_WORKER_LAYERS_ELEMENTWISE_ACTIVATION_H_

#include <string>

#include "kernels/activations.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class ElementwiseActivation : public Layer<T> {
 public:
  // `negative_slope` is LeakyReLU's (any finite number, as PyTorch).
  explicit ElementwiseActivation(ActivationKind kind,
                                 double negative_slope = 0.01)
      : kind_(kind), slope_(negative_slope) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  FusedActivation fused_activation_kind() const override {
    return kind_ == ActivationKind::kRelu6 ? FusedActivation::kRelu6
                                           : FusedActivation::kNone;
  }
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  const ActivationKind kind_;
  const double slope_;
  const BasicTensor<T>* in_ = nullptr;
};

extern template class ElementwiseActivation<float>;
extern template class ElementwiseActivation<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_ELEMENTWISE_ACTIVATION_H_
