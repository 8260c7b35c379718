// The optimizer update rules over a flat parameter buffer: one fused pass
// over parameters, gradients and state per step, with PyTorch's update
// rules exactly (torch.optim.SGD, Adam, AdamW; dampening 0, no amsgrad).
//
//   SGD:   g = grad + wd * p;  b = mu * b + g;  d = nesterov ? g + mu * b : b
//          (d = g without momentum);  p -= lr * d.  The first step gives
//          b = g because the buffer starts at zero.
//   Adam:  g = grad + wd * p (L2);  t += 1;  m = m + (1 - b1) (g - m);
//          v = b2 v + (1 - b2) g^2;
//          p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW: as Adam without the L2 term, after p *= 1 - lr * wd (decoupled).
//
// Written once here for every CPU user: the CPU engine (worker/optim/
// optimizer.h makes these from a job's OptimizerSpec) and the
// parameter-server shard (server/ps/shard_state.h). The CUDA kernels
// (kernels/cuda/ops.h) do the same operations with the same scalars
// (kernels/update_options.h).
//
// Ownership: a rule owns its state (momentum buffer; Adam's m, v and step
// count), sized for `num_elements` at construction; Step never allocates.
// The caller owns parameters and gradients. Thread safety: none; one thread
// steps a given rule.
#ifndef COHORT_KERNELS_UPDATE_RULES_H_
#define COHORT_KERNELS_UPDATE_RULES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/tensor.h"
#include "kernels/update_options.h"

namespace cohort {

template <typename T>
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;

  // params -= update(grads), with learning rate `lr` for this step. Both
  // spans have the num_elements the rule was made for.
  virtual void Step(absl::Span<T> params, absl::Span<const T> grads,
                    double lr) = 0;

  // State tensors for checkpoints, in a fixed order: SGD with momentum
  // {buffer}, SGD without none, Adam/AdamW {m, v, step}, where `step` has
  // shape {1} and holds the number of steps taken (exact in float up to
  // 2^24 steps). Writing into them restores a checkpoint.
  virtual std::vector<BasicTensor<T>*> State() = 0;
};

// SGD (with momentum and Nesterov as `options` says) for a flat buffer of
// `num_elements`.
template <typename T>
std::unique_ptr<UpdateRule<T>> MakeSgdRule(const SgdOptions& options,
                                           int64_t num_elements);

// Adam, or AdamW when options.decoupled, for a flat buffer of
// `num_elements`.
template <typename T>
std::unique_ptr<UpdateRule<T>> MakeAdamRule(const AdamOptions& options,
                                            int64_t num_elements);

extern template std::unique_ptr<UpdateRule<float>> MakeSgdRule<float>(
    const SgdOptions&, int64_t);
extern template std::unique_ptr<UpdateRule<double>> MakeSgdRule<double>(
    const SgdOptions&, int64_t);
extern template std::unique_ptr<UpdateRule<float>> MakeAdamRule<float>(
    const AdamOptions&, int64_t);
extern template std::unique_ptr<UpdateRule<double>> MakeAdamRule<double>(
    const AdamOptions&, int64_t);

}  // namespace cohort

#endif  // COHORT_KERNELS_UPDATE_RULES_H_
