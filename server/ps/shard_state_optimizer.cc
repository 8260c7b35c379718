// The shard's update rules (shard_state.h): one per partition, from the
// job's OptimizerSpec, with the partition's share of the weight decay
// exclusion, read from the spec as the worker reads it
// (common/optimizer_options.h).
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "common/model_sizes.h"
#include "common/optimizer_options.h"
#include "server/ps/shard_state.h"

namespace cohort {

std::unique_ptr<UpdateRule<float>> ShardState::NewOptimizer(
    const OptimizerSpec& spec, int64_t count, const RuleLayout& layout) {
  return MakeUpdateRule<float>(RuleOptionsOf(spec), count, layout);
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
