#include "common/optimizer_options.h"

namespace cohort {

SgdOptions SgdOptionsOf(const OptimizerSpec& spec) {
  SgdOptions o;
  o.momentum = spec.momentum();
  o.weight_decay = spec.weight_decay();
  o.nesterov = spec.nesterov();
  return o;
}

AdamOptions AdamOptionsOf(const OptimizerSpec& spec) {
  AdamOptions o;
  o.beta1 = spec.beta1();
  o.beta2 = spec.beta2();
  o.eps = spec.eps();
  o.weight_decay = spec.weight_decay();
  o.decoupled = spec.kind() == OptimizerSpec::ADAMW;
  return o;
}

RmspropOptions RmspropOptionsOf(const OptimizerSpec& spec) {
  RmspropOptions o;
  o.alpha = spec.alpha();
  o.eps = spec.eps();
  o.weight_decay = spec.weight_decay();
  o.momentum = spec.momentum();
  o.centered = spec.centered();
  return o;
}

LambOptions LambOptionsOf(const OptimizerSpec& spec) {
  LambOptions o;
  o.beta1 = spec.beta1();
  o.beta2 = spec.beta2();
  o.eps = spec.eps();
  o.weight_decay = spec.weight_decay();
  return o;
}

LarsOptions LarsOptionsOf(const OptimizerSpec& spec) {
  LarsOptions o;
  o.momentum = spec.momentum();
  o.weight_decay = spec.weight_decay();
  o.trust_coefficient = spec.trust_coefficient();
  return o;
}

AdagradOptions AdagradOptionsOf(const OptimizerSpec& spec) {
  AdagradOptions o;
  o.lr_decay = spec.lr_decay();
  o.weight_decay = spec.weight_decay();
  o.initial_accumulator_value = spec.initial_accumulator_value();
  o.eps = spec.eps();
  return o;
}

RuleOptions RuleOptionsOf(const OptimizerSpec& spec) {
  RuleOptions r;
  switch (spec.kind()) {
    case OptimizerSpec::ADAM:
    case OptimizerSpec::ADAMW:
      r.kind = RuleKind::kAdam;
      r.adam = AdamOptionsOf(spec);
      break;
    case OptimizerSpec::RMSPROP:
      r.kind = RuleKind::kRmsprop;
      r.rmsprop = RmspropOptionsOf(spec);
      break;
    case OptimizerSpec::LAMB:
      r.kind = RuleKind::kLamb;
      r.lamb = LambOptionsOf(spec);
      break;
    case OptimizerSpec::LARS:
      r.kind = RuleKind::kLars;
      r.lars = LarsOptionsOf(spec);
      break;
    case OptimizerSpec::ADAGRAD:
      r.kind = RuleKind::kAdagrad;
      r.adagrad = AdagradOptionsOf(spec);
      break;
    default:  // SGD; the validator refuses unknown kinds
      r.kind = RuleKind::kSgd;
      r.sgd = SgdOptionsOf(spec);
      break;
  }
  return r;
}

}  // namespace cohort
