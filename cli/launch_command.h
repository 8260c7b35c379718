// `cohort launch`: one command line for every task of a job that a
// scheduler starts -- `srun cohort launch ...` under SLURM, or a
// PyTorchJob's container args with MASTER_ADDR, MASTER_PORT, RANK and
// WORLD_SIZE set (cli/launch_env.h). Launch rank 0 serves the coordinator in
// its own process and also trains as a worker; every other rank is a plain
// `cohort worker` of that coordinator.
#ifndef COHORT_CLI_LAUNCH_COMMAND_H_
#define COHORT_CLI_LAUNCH_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

// Runs `cohort launch ARGS...`; *help is set when --help was printed, and
// *exit_code, on the coordinator's rank, to 0 for a job that SUCCEEDED and
// 1 otherwise.
absl::Status RunLaunch(const std::vector<std::string>& args, bool* help,
                       int* exit_code);

}  // namespace cohort

#endif  // COHORT_CLI_LAUNCH_COMMAND_H_
