// Flatten: batch-inner {C, N, L} or {C, N, H, W} activations to dense
// {N, C * L} or {N, C * H * W}, features in PyTorch's (C, H, W) order, so
// that the Linear layer after it has PyTorch's weight layout. Dense {N, F}
// input passes through unchanged.
//
// The layer owns no buffers; it remembers only the last input shape.
// Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_FLATTEN_H_
#define COHORT_WORKER_LAYERS_FLATTEN_H_

#include <string>

#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Flatten : public Layer<T> {
 public:
  Flatten() = default;

  std::string Name() const override { return "flatten"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  Shape in_shape_;  // of the last Forward, with the batch
};

extern template class Flatten<float>;
extern template class Flatten<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_FLATTEN_H_
