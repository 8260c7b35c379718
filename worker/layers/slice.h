// Slice: x[:, begin:end] of a flat sample, {F} -> {end - begin}
// (LayerSpec.slice). It splits a sample whose columns mean different
// things (a recommendation model's dense features and categorical ids)
// between the paths of a branch. Dense activations are {N, F} (layer.h), so
// the output is one contiguous copy per sample; Backward writes the output
// gradient into its window of a zero input gradient. No parameters.
//
// Ownership: the layer owns nothing; it remembers the bounds and the input
// width. Forward and Backward allocate nothing once the batch size stops
// changing. Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_SLICE_H_
#define COHORT_WORKER_LAYERS_SLICE_H_

#include <cstdint>
#include <string>

#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Slice : public Layer<T> {
 public:
  // Features [begin, end) of the sample.
  Slice(int64_t begin, int64_t end) : begin_(begin), end_(end) {}

  // "slice(13, 65)".
  std::string Name() const override;
  // {F} with 0 <= begin < end <= F -> {end - begin}; InvalidArgument naming
  // the layer, the bounds and the input otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  int64_t begin_, end_;
  int64_t features_ = 0;  // F, after Configure
};

extern template class Slice<float>;
extern template class Slice<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_SLICE_H_
