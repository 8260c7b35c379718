// ToSequence: a 2-D spatial activation {C, N, H, W} as the sequence
// {C, N, H * W} the transformer layers take (layer.h), position h * W + w
// holding pixel (h, w)'s C features: PyTorch's x.flatten(2).transpose(1, 2)
// after a vision transformer's patch convolution. The batch-inner layout
// already keeps each sample's pixels in that order, so forward and
// backward are plain copies. No parameters.
//
// Ownership: the layer owns nothing; it remembers only the last input
// shape. Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_TO_SEQUENCE_H_
#define COHORT_WORKER_LAYERS_TO_SEQUENCE_H_

#include <string>

#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class ToSequence : public Layer<T> {
 public:
  std::string Name() const override { return "to_sequence"; }
  // Per-sample {C, H, W} -> {C, H * W}; InvalidArgument otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  Shape in_shape_;  // of the last Forward, with the batch
};

extern template class ToSequence<float>;
extern template class ToSequence<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_TO_SEQUENCE_H_
