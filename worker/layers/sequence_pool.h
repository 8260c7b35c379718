// SequencePool: a sequence {D, N, L} (layer.h) pooled over its L positions
// to dense {N, D}: mode MEAN is PyTorch's x.mean(dim=1) on [N, L, D], a
// vision transformer's head without a class token. Each (feature, sample)
// row of the batch-inner layout is contiguous, so the mean is the global
// average pool's kernel (kernels/pool.h). No parameters.
//
// Ownership: the layer owns nothing; it remembers only the last input
// shape. Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_SEQUENCE_POOL_H_
#define COHORT_WORKER_LAYERS_SEQUENCE_POOL_H_

#include <cstdint>
#include <string>

#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class SequencePool : public Layer<T> {
 public:
  std::string Name() const override { return "sequence_pool(mean)"; }
  // Per-sample {D, L} -> {D}; InvalidArgument otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  int64_t length_ = 0;
  Shape in_shape_;  // of the last Forward, with the batch
};

extern template class SequencePool<float>;
extern template class SequencePool<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_SEQUENCE_POOL_H_
