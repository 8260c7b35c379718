// Softmax over the features (PyTorch's nn.Softmax(dim=1)): of each row of
// dense {N, F} activations, and across the channels at each position of
// batch-inner {C, N, L} and {C, N, H, W} ones (kernels/softmax.h). No
// parameters.
//
// Ownership: the layer owns nothing; it keeps a pointer to the last forward
// input, which the caller keeps alive until Backward (the probabilities are
// recomputed from it there, not kept). Thread safety: none; one replica's
// thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_SOFTMAX_H_
#define COHORT_WORKER_LAYERS_SOFTMAX_H_

#include <string>

#include "kernels/softmax.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Softmax : public Layer<T> {
 public:
  std::string Name() const override { return "softmax"; }
  // Per-sample {F}, {C, L} or {C, H, W}, every dim at least 1.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  // The batch `in` as [outer, axis, inner] with the features as the axis.
  SoftmaxGeometry Geometry(const BasicTensor<T>& in) const;

  Shape sample_;
  const BasicTensor<T>* in_ = nullptr;
};

extern template class Softmax<float>;
extern template class Softmax<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_SOFTMAX_H_
