// A job's OptimizerSpec as the update rules' hyper-parameters
// (common/update_options.h): the one mapping that the worker's CPU rules and
// GPU kernels and the parameter-server shards all use, so that every place
// that applies the job's optimizer reads its spec alike.
//
// `spec` must have been validated and its defaults filled (ParseJobSpec);
// values are used as given, zeros included. Pure functions: thread-safe.
#ifndef COHORT_COMMON_OPTIMIZER_OPTIONS_H_
#define COHORT_COMMON_OPTIMIZER_OPTIONS_H_

#include "common/update_options.h"
#include "proto/job.pb.h"

namespace cohort {

SgdOptions SgdOptionsOf(const OptimizerSpec& spec);
AdamOptions AdamOptionsOf(const OptimizerSpec& spec);
RmspropOptions RmspropOptionsOf(const OptimizerSpec& spec);
LambOptions LambOptionsOf(const OptimizerSpec& spec);
LarsOptions LarsOptionsOf(const OptimizerSpec& spec);
AdagradOptions AdagradOptionsOf(const OptimizerSpec& spec);

// The rule `spec` names and its options (for MakeUpdateRule).
RuleOptions RuleOptionsOf(const OptimizerSpec& spec);

}  // namespace cohort

#endif  // COHORT_COMMON_OPTIMIZER_OPTIONS_H_
