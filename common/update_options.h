// The hyper-parameters of the optimizer update rules (torch.optim.SGD, Adam
// and AdamW) and Adam's per-step scalars: the one definition that the CPU
// rules (kernels/update_rules.h, which the CPU engine and the
// parameter-server shard step) and the CUDA kernels (kernels/cuda/ops.h)
// share, so that every device rounds the same scalars the same way.
//
// It lives in common/ so that the one mapping from a job's OptimizerSpec
// (common/optimizer_options.h) serves the worker and the parameter-server
// shards alike. nvcc reads this header too (through
// kernels/cuda/ops_launch.h), which is why it includes nothing but the
// standard library.
//
// Plain values and a pure function: no ownership, thread-safe.
#ifndef COHORT_COMMON_UPDATE_OPTIONS_H_
#define COHORT_COMMON_UPDATE_OPTIONS_H_

#include <cmath>

namespace cohort {

// torch.optim.SGD's hyper-parameters (dampening 0). A rule rounds them to
// its element type once, when it is made (a kernel, at each launch).
struct SgdOptions {
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// Adam's hyper-parameters, used as given (zeros included); `decoupled`
// selects AdamW (weight decay applied as p *= 1 - lr * wd instead of as an
// L2 gradient term).
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false;
};

// torch.optim.RMSprop's hyper-parameters, used as given.
struct RmspropOptions {
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
};

// torch.optim.Adagrad's hyper-parameters, used as given.
struct AdagradOptions {
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};

// LAMB's hyper-parameters (kernels/update_rules.h has the formula).
struct LambOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0;
};

// LARS's hyper-parameters (kernels/update_rules.h has the formula).
struct LarsOptions {
  double momentum = 0;
  double weight_decay = 0;
  double trust_coefficient = 0.001;
};

// Which rule, with its hyper-parameters: what a job's optimizer spec says
// (common/optimizer_options.h), for kernels/update_rules.h's MakeUpdateRule.
enum class RuleKind { kSgd, kAdam, kRmsprop, kLamb, kLars, kAdagrad };
struct RuleOptions {
  RuleKind kind = RuleKind::kSgd;
  SgdOptions sgd;    // kSgd
  AdamOptions adam;  // kAdam (AdamW: adam.decoupled)
  RmspropOptions rmsprop;
  LambOptions lamb;
  LarsOptions lars;
  AdagradOptions adagrad;
};

// LAMB's and LARS's per-tensor factor from the tensor's two norms:
// num / den, or 1 when either is 0 (a zero tensor, or a zero update),
// computed in double. LAMB: ||p|| / ||u||; LARS: tc * ||p|| / (||g|| + wd *
// ||p||), where the caller passes num = tc * ||p|| and den = ||g|| + wd *
// ||p||, and `zero` says whether ||p|| or ||g|| is 0.
inline double TrustRatio(double num, double den, bool zero) {
  return zero || den == 0 ? 1.0 : num / den;
}

// What one Adam/AdamW step needs besides the tensors, in the update's
// element type T.
template <typename T>
struct AdamScalars {
  T decay;  // AdamW: p *= decay first; 1 for Adam
  T l2;     // Adam: g += l2 * p; 0 for AdamW
  T beta2;
  T lerp1;  // 1 - beta1
  T one_minus_beta2;
  T bc2_sqrt;  // sqrt(1 - beta2^t)
  T eps;
  T step_size;  // lr / (1 - beta1^t)
};

// The scalars of step `t` (the steps taken, this one included: 1 on the
// first) at learning rate `lr`, computed in double (as PyTorch does in
// Python) and only then rounded to T: the bias corrections lose too much
// when computed in float. `t` is a double because the CPU rules keep it in
// a state tensor.
template <typename T>
inline AdamScalars<T> MakeAdamScalars(double lr, double t,
                                      const AdamOptions& o) {
  AdamScalars<T> s;
  s.decay = static_cast<T>(o.decoupled ? 1.0 - lr * o.weight_decay : 1.0);
  s.l2 = static_cast<T>(o.decoupled ? 0.0 : o.weight_decay);
  s.beta2 = static_cast<T>(o.beta2);
  s.lerp1 = static_cast<T>(1.0 - o.beta1);
  s.one_minus_beta2 = static_cast<T>(1.0 - o.beta2);
  s.bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(o.beta2, t)));
  s.eps = static_cast<T>(o.eps);
  s.step_size = static_cast<T>(lr / (1.0 - std::pow(o.beta1, t)));
  return s;
}

}  // namespace cohort

#endif  // COHORT_COMMON_UPDATE_OPTIONS_H_
