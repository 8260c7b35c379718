// Inverted dropout: in training each element is zeroed with probability p
// and the kept ones are scaled by 1 / (1 - p), so evaluation is the identity.
//
// The layer owns its random generator and the keep-mask of the last training
// Forward (one byte per element). Thread safety: none; one replica's thread
// drives a layer, and each replica seeds its own stream with SeedRandom.
#ifndef COHORT_WORKER_LAYERS_DROPOUT_H_
#define COHORT_WORKER_LAYERS_DROPOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Dropout : public Layer<T> {
 public:
  // p outside [0, 1) is reported by Configure.
  explicit Dropout(double p);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void SeedRandom(uint64_t seed) override { rng_.seed(seed); }
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  void DrawMask(int64_t n);

  double p_;
  Rng rng_;
  std::vector<uint8_t> mask_;
  Shape in_shape_;
  bool masked_ = false;  // the last Forward dropped (train mode, p > 0)
};

extern template class Dropout<float>;
extern template class Dropout<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_DROPOUT_H_
