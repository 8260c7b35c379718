// Training losses of the CPU engine. Each returns the batch loss and writes
// dLoss/dInput into `grad` (resized, its storage reused across steps; null
// skips the gradient, for evaluation).
//
// Plain functions: they own nothing and keep no state; thread-safe for
// distinct `grad` tensors. Instantiated for float and double.
#ifndef COHORT_WORKER_LOSS_H_
#define COHORT_WORKER_LOSS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/tensor.h"

namespace cohort {

// Mean over the batch of softmax cross-entropy; logits dense {N, K}, one
// label in [0, K) per row (an out-of-range label is a CHECK failure: the
// data set validates its labels when it loads them). Computed with the
// row maximum subtracted, so large logits do not overflow. Counts rows whose
// first maximal logit is the label into *correct when not null.
template <typename T>
T SoftmaxCrossEntropy(const BasicTensor<T>& logits,
                      absl::Span<const int32_t> labels, BasicTensor<T>* grad,
                      int64_t* correct = nullptr);

// Mean over all elements of (pred - target)^2; grad = 2 (pred - target) /
// size. `pred` and `target` must have the same number of elements.
template <typename T>
T MeanSquaredError(const BasicTensor<T>& pred, const BasicTensor<T>& target,
                   BasicTensor<T>* grad);

}  // namespace cohort

#endif  // COHORT_WORKER_LOSS_H_
