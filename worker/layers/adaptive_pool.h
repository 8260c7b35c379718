// AdaptiveAvgPool2d over batch-inner {C, N, H, W} activations: PyTorch's
// nn.AdaptiveAvgPool2d(k), per sample {C, H, W} -> {C, k, k}, each output
// cell the mean of its window (kernels/adaptive_pool.h gives the bounds:
// windows may overlap and differ in size). No parameters.
//
// Ownership: the layer keeps only its geometry, no pointer to its input.
// Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_ADAPTIVE_POOL_H_
#define COHORT_WORKER_LAYERS_ADAPTIVE_POOL_H_

#include <cstdint>
#include <string>

#include "kernels/adaptive_pool.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class AdaptiveAvgPool2d : public Layer<T> {
 public:
  // `output`: the output's height and width.
  explicit AdaptiveAvgPool2d(int64_t output) : output_(output) {}

  std::string Name() const override;
  // Per-sample {C, H, W} with H, W >= 1; `output` must be at least 1.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  const int64_t output_;
  AdaptivePool2dGeometry geometry_;  // planes set per batch
  int64_t channels_ = 0;
  int64_t batch_ = 0;
};

extern template class AdaptiveAvgPool2d<float>;
extern template class AdaptiveAvgPool2d<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_ADAPTIVE_POOL_H_
