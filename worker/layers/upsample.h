// Upsample over batch-inner {C, N, H, W} activations: PyTorch's
// nn.Upsample(scale_factor=k) for an integer k, nearest or bilinear with
// align_corners=False, per sample {C, H, W} -> {C, k H, k W}
// (kernels/upsample.h). No parameters.
//
// Ownership: the layer keeps only its geometry, no pointer to its input.
// Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_UPSAMPLE_H_
#define COHORT_WORKER_LAYERS_UPSAMPLE_H_

#include <cstdint>
#include <string>

#include "kernels/upsample.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Upsample : public Layer<T> {
 public:
  Upsample(int64_t scale, UpsampleMode mode) : scale_(scale), mode_(mode) {}

  std::string Name() const override;
  // Per-sample {C, H, W} with every dim at least 1; scale at least 1.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  const int64_t scale_;
  const UpsampleMode mode_;
  UpsampleGeometry geometry_;  // planes set per batch
  int64_t channels_ = 0;
  int64_t batch_ = 0;
};

extern template class Upsample<float>;
extern template class Upsample<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_UPSAMPLE_H_
