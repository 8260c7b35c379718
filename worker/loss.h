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

// PyTorch's CrossEntropyLoss(weight=..., ignore_index=...): a row (or a
// sequence position) of label y counts `weights[y]` (1 when `weights` is
// empty), and nothing when y is `ignore_index`; the loss is the weighted
// mean sum w l / sum w (0 when every row counts nothing). The span is
// borrowed for the call.
struct ClassWeighting {
  absl::Span<const float> weights;
  int32_t ignore_index = -1;  // < 0: none

  bool active() const { return !weights.empty() || ignore_index >= 0; }
  double Of(int64_t label) const {
    if (label == ignore_index) return 0;
    return weights.empty() ? 1.0 : static_cast<double>(weights[label]);
  }
};

// Mean over the batch of softmax cross-entropy; logits dense {N, K}, one
// label in [0, K) per row (an out-of-range label is a CHECK failure: the
// data set validates its labels when it loads them). Computed with the
// row maximum subtracted, so large logits do not overflow. Counts rows whose
// first maximal logit is the label into *correct when not null. With
// `label_smoothing` e in [0, 1), the target is (1 - e) one-hot + e / K, as
// PyTorch's CrossEntropyLoss(label_smoothing=e).
// `weighting` (default: none) as ClassWeighting says; its weights cover
// the K classes.
template <typename T>
T SoftmaxCrossEntropy(const BasicTensor<T>& logits,
                      absl::Span<const int32_t> labels, BasicTensor<T>* grad,
                      int64_t* correct = nullptr, T label_smoothing = 0,
                      const ClassWeighting& weighting = {});

// Mean over every position of softmax cross-entropy for sequences (a
// language model's next-token loss): logits {V, N, L} in the channel-major
// sequence layout (worker/layers/layer.h), `targets` the N * L class ids as
// floats (column n * L + t), each in [0, V) (a CHECK failure otherwise: the
// data set validates ids when it opens its files). Label smoothing,
// `correct` (positions whose first maximal logit is the target) and the
// numerics are those of SoftmaxCrossEntropy; the columns are processed in
// blocks so every pass reads contiguous rows.
template <typename T>
T SequenceCrossEntropy(const BasicTensor<T>& logits,
                       absl::Span<const float> targets, BasicTensor<T>* grad,
                       int64_t* correct = nullptr, T label_smoothing = 0,
                       const ClassWeighting& weighting = {});

// Rows of `logits` {N, K} whose label is among their k largest logits
// (ties broken towards the lower index, as torch.topk on CPU).
template <typename T>
int64_t CountTopK(const BasicTensor<T>& logits,
                  absl::Span<const int32_t> labels, int k);

// Mean over all elements of (pred - target)^2; grad = 2 (pred - target) /
// size. `pred` and `target` must have the same number of elements.
template <typename T>
T MeanSquaredError(const BasicTensor<T>& pred, const BasicTensor<T>& target,
                   BasicTensor<T>* grad);

// The losses that compare outputs with float targets element by element,
// each the mean over all elements (PyTorch's reduction="mean"):
//   kMse    (p - t)^2
//   kL1     |p - t|                 (gradient 0 where p == t)
//   kHuber  (p - t)^2 / 2 below `delta`, delta (|p - t| - delta / 2) above
//           (torch.nn.HuberLoss; SmoothL1Loss equals it at delta 1)
//   kBce    binary cross-entropy of sigmoid(p) against t, computed as
//           max(p, 0) - p t + log(1 + exp(-|p|)) so large |p| is exact
enum class ElementLoss { kMse, kL1, kHuber, kBce };

template <typename T>
T ElementwiseLoss(ElementLoss kind, T delta, const BasicTensor<T>& pred,
                  const BasicTensor<T>& target, BasicTensor<T>* grad);

}  // namespace cohort

#endif  // COHORT_WORKER_LOSS_H_
