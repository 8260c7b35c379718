// The `cohort train` subcommand.
#ifndef COHORT_CLI_TRAIN_COMMAND_H_
#define COHORT_CLI_TRAIN_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort {

// Runs `cohort train ARGS...`; prints the result line on stdout. Sets *help
// when --help was asked for (and printed).
absl::Status RunTrain(const std::vector<std::string>& args, bool* help);

}  // namespace cohort

#endif  // COHORT_CLI_TRAIN_COMMAND_H_
