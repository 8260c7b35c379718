// Pooling layers over batch-inner {C, N, H, W} activations: MaxPool2d,
// AvgPool2d (zero padding counted in the divisor, PyTorch's
// count_include_pad=true) and GlobalAvgPool, which averages each plane and
// also flattens to dense {N, C}. Floor mode only (PyTorch's default).
//
// MaxPool2d owns the argmax indices (int32, one per output) of the last
// Forward, so Backward is a scatter without comparisons. Pool layers keep
// no pointer to their input. Thread safety: none; one replica's thread
// drives a layer.
#ifndef COHORT_WORKER_LAYERS_POOL_H_
#define COHORT_WORKER_LAYERS_POOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/pool.h"
#include "worker/layers/layer.h"

namespace cohort {

struct PoolOptions {
  int64_t kernel = 2;
  int64_t stride = 0;  // 0 = kernel
  int64_t padding = 0;
};

// Validation and geometry shared by MaxPool2d and AvgPool2d.
template <typename T>
class Pool2dBase : public Layer<T> {
 public:
  std::string Name() const override;
  // Per-sample {C, H, W}; the kernel must fit the padded input and padding
  // be at most half the kernel (PyTorch's rules).
  absl::StatusOr<Shape> Configure(const Shape& in) override;

 protected:
  Pool2dBase(const char* kind, PoolOptions o);
  // The geometry for batch input `in` ({C, N, H, W}).
  const Pool2dGeometry& GeometryFor(const BasicTensor<T>& in);

  Pool2dGeometry geometry_;
  int64_t channels_ = 0;
  int64_t batch_ = 0;

 private:
  const char* kind_;
  PoolOptions options_;
};

template <typename T>
class MaxPool2d : public Pool2dBase<T> {
 public:
  explicit MaxPool2d(PoolOptions o) : Pool2dBase<T>("maxpool2d", o) {}
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  std::vector<int32_t> argmax_;
};

template <typename T>
class AvgPool2d : public Pool2dBase<T> {
 public:
  explicit AvgPool2d(PoolOptions o) : Pool2dBase<T>("avgpool2d", o) {}
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;
};

// {C, N, H, W} -> {N, C} (also accepts {C, N, L}); per sample {C, H, W} ->
// {C}.
template <typename T>
class GlobalAvgPool : public Layer<T> {
 public:
  GlobalAvgPool() = default;
  std::string Name() const override { return "global_avg_pool"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  int64_t plane_ = 0;  // elements per channel and sample
  Shape in_shape_;     // of the last Forward, with the batch
};

extern template class Pool2dBase<float>;
extern template class Pool2dBase<double>;
extern template class MaxPool2d<float>;
extern template class MaxPool2d<double>;
extern template class AvgPool2d<float>;
extern template class AvgPool2d<double>;
extern template class GlobalAvgPool<float>;
extern template class GlobalAvgPool<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_POOL_H_
