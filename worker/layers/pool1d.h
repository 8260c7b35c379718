// 1-D pooling over batch-inner {C, N, L} activations: MaxPool1d and
// AvgPool1d with PyTorch's semantics (floor mode; stride defaults to the
// kernel; AvgPool1d counts zero padding in the divisor, count_include_pad
// =True). Per sample {C, L} -> {C, L_out}.
//
// MaxPool1d owns the argmax positions (int32, one per output) of the last
// Forward, so Backward is a scatter without comparisons. Neither keeps a
// pointer to its input. Thread safety: none; one replica's thread drives a
// layer.
#ifndef COHORT_WORKER_LAYERS_POOL1D_H_
#define COHORT_WORKER_LAYERS_POOL1D_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/pool1d.h"
#include "worker/layers/layer.h"
#include "worker/layers/pool.h"

namespace cohort {

template <typename T>
class Pool1d : public Layer<T> {
 public:
  Pool1d(bool max, PoolOptions o);
  std::string Name() const override;
  // Per-sample {C, L}; the kernel must fit the padded input and padding be
  // at most half the kernel (PyTorch's rules).
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  const bool max_;
  PoolOptions options_;
  Pool1dGeometry geometry_;
  int64_t channels_ = 0, batch_ = 0;
  std::vector<int32_t> argmax_;
};

extern template class Pool1d<float>;
extern template class Pool1d<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_POOL1D_H_
