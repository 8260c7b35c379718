// `cohort layers [KIND]`: the layer kinds a job spec's model can use, and
// each kind's fields with their types and meaning, read from job.proto's
// own comments (compiled in): the reference for a user with only the
// binary.
//
// Thread safety: a plain function.
#ifndef COHORT_CLI_LAYERS_COMMAND_H_
#define COHORT_CLI_LAYERS_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

// Prints every kind (no argument) or one kind's fields; NotFound naming
// the nearest kinds for an unknown one.
absl::Status RunLayers(const std::vector<std::string>& args, bool* help);

}  // namespace cohort

#endif  // COHORT_CLI_LAYERS_COMMAND_H_
