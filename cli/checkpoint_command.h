// The `cohort checkpoint` subcommand: offline checks of a checkpoint
// directory (common/checkpoint.h).
#ifndef COHORT_CLI_CHECKPOINT_COMMAND_H_
#define COHORT_CLI_CHECKPOINT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

// Runs `cohort checkpoint ARGS...`. Today the one action is
// `verify DIR`: reads every ckpt-*.cohort file in DIR, prints one line per
// file on stdout, and fails (DATA_LOSS naming the bad files) unless every
// one verifies. NOT_FOUND for a missing directory or one without
// checkpoint files. Sets *help when --help was asked for (and printed).
absl::Status RunCheckpoint(const std::vector<std::string>& args, bool* help);

}  // namespace cohort

#endif  // COHORT_CLI_CHECKPOINT_COMMAND_H_
