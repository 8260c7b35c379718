// The shard's update rules (shard_state.h): one per partition, from the
// job's OptimizerSpec, with the partition's share of the weight decay
// exclusion. The spec-to-options mapping repeats worker/optim/optimizer.cc's
// because the layering keeps the shard out of worker/; both are checked
// against the same rules by tests/ps_equivalence_test.
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "common/model_sizes.h"
#include "server/ps/shard_state.h"

namespace cohort {

std::unique_ptr<UpdateRule<float>> ShardState::NewOptimizer(
    const OptimizerSpec& spec, int64_t count, const RuleLayout& layout) {
  switch (spec.kind()) {
    case OptimizerSpec::SGD: {
      SgdOptions o;
      o.momentum = spec.momentum();
      o.weight_decay = spec.weight_decay();
      o.nesterov = spec.nesterov();
      return MakeSgdRule<float>(o, count, layout);
    }
    case OptimizerSpec::ADAM:
    case OptimizerSpec::ADAMW: {
      AdamOptions o;
      o.beta1 = spec.beta1();
      o.beta2 = spec.beta2();
      o.eps = spec.eps();
      o.weight_decay = spec.weight_decay();
      o.decoupled = spec.kind() == OptimizerSpec::ADAMW;
      return MakeAdamRule<float>(o, count, layout);
    }
    case OptimizerSpec::RMSPROP: {
      RmspropOptions o;
      o.alpha = spec.alpha();
      o.eps = spec.eps();
      o.weight_decay = spec.weight_decay();
      o.momentum = spec.momentum();
      o.centered = spec.centered();
      return MakeRmspropRule<float>(o, count, layout);
    }
    case OptimizerSpec::LAMB: {
      LambOptions o;
      o.beta1 = spec.beta1();
      o.beta2 = spec.beta2();
      o.eps = spec.eps();
      o.weight_decay = spec.weight_decay();
      return MakeLambRule<float>(o, count, layout);
    }
    case OptimizerSpec::LARS: {
      LarsOptions o;
      o.momentum = spec.momentum();
      o.weight_decay = spec.weight_decay();
      o.trust_coefficient = spec.trust_coefficient();
      return MakeLarsRule<float>(o, count, layout);
    }
    default:
      CHECK(false) << "unknown optimizer kind " << spec.kind();
      return nullptr;
  }
}

RuleLayout ShardState::PartitionLayout(const JobSpec& job, const Partition& p) {
  if (!job.optimizer().no_decay_bias_and_norm()) return {};
  absl::StatusOr<ModelSizes> sizes = InferJobModelSizes(job);
  // The job was validated, so its sizes are known; a failure here would be
  // a bug, and decay everywhere is the safe reading.
  if (!sizes.ok()) {
    LOG(ERROR) << "no weight decay exclusion: " << sizes.status();
    return {};
  }
  return MakeRuleLayout(
      ParamTensorsOf(sizes->PaddedParamSizes(), sizes->ParamNoDecay()),
      p.offset(), p.offset() + p.count());
}

}  // namespace cohort
