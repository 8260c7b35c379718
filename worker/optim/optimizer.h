// Optimizers over a model's flat parameter buffer (worker/layers/
// param_store.h): one fused pass over parameters, gradients and state per
// step, with PyTorch's update rules exactly (torch.optim.SGD, Adam, AdamW;
// dampening 0, no amsgrad).
//
//   SGD:   g = grad + wd * p;  b = mu * b + g;  d = nesterov ? g + mu * b : b
//          (d = g without momentum);  p -= lr * d.  The first step gives
//          b = g because the buffer starts at zero.
//   Adam:  g = grad + wd * p (L2);  t += 1;  m = m + (1 - b1) (g - m);
//          v = b2 v + (1 - b2) g^2;
//          p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW: as Adam without the L2 term, after p *= 1 - lr * wd (decoupled).
//
// Ownership: an optimizer owns its state (momentum buffer; Adam's m, v and
// step count), sized for `num_elements` at construction; Step never
// allocates. The caller owns parameters and gradients. Thread safety: none;
// one thread steps a given optimizer.
#ifndef COHORT_WORKER_OPTIM_OPTIMIZER_H_
#define COHORT_WORKER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {

template <typename T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // params -= update(grads), with learning rate `lr` for this step. Both
  // spans have the num_elements the optimizer was made for.
  virtual void Step(absl::Span<T> params, absl::Span<const T> grads,
                    double lr) = 0;

  // State tensors for checkpoints, in a fixed order: SGD with momentum
  // {buffer}, SGD without none, Adam/AdamW {m, v, step}, where `step` has
  // shape {1} and holds the number of steps taken (exact in float up to
  // 2^24 steps). Writing into them restores a checkpoint.
  virtual std::vector<BasicTensor<T>*> State() = 0;
};

// The optimizer `spec` describes, for a flat buffer of `num_elements`.
// `spec` must have been validated and its defaults filled (ParseJobSpec);
// Adam's betas and eps are used as given, zeros included.
template <typename T>
std::unique_ptr<Optimizer<T>> MakeOptimizer(const OptimizerSpec& spec,
                                            int64_t num_elements);

extern template std::unique_ptr<Optimizer<float>> MakeOptimizer<float>(
    const OptimizerSpec&, int64_t);
extern template std::unique_ptr<Optimizer<double>> MakeOptimizer<double>(
    const OptimizerSpec&, int64_t);

}  // namespace cohort

#endif  // COHORT_WORKER_OPTIM_OPTIMIZER_H_
