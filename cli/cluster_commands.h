// The multi-process subcommands: coordinator, worker, local, and the
// operator queries status, metrics and stop.
#ifndef COHORT_CLI_CLUSTER_COMMANDS_H_
#define COHORT_CLI_CLUSTER_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "common/security.h"

namespace cohort {

// Each runs `cohort NAME ARGS...`. *help is set when --help was printed.
// *exit_code is set when the command decides its own non-error exit status
// (the coordinator exits 1 for a FAILED job without an absl error).
absl::Status RunCoordinator(const std::vector<std::string>& args, bool* help,
                            int* exit_code);
absl::Status RunWorkerCommand(const std::vector<std::string>& args, bool* help);
absl::Status RunPsCommand(const std::vector<std::string>& args, bool* help);
absl::Status RunLocal(const std::vector<std::string>& args, bool* help,
                      int* exit_code, const char* self_path);
absl::Status RunStatus(const std::vector<std::string>& args, bool* help);
absl::Status RunMetrics(const std::vector<std::string>& args, bool* help);
absl::Status RunStop(const std::vector<std::string>& args, bool* help);

// --straggler=RANK:FACTOR: worker RANK runs FACTOR (>= 1) times slower.
struct Straggler {
  int rank = -1;
  double factor = 1.0;
};
absl::StatusOr<Straggler> ParseStraggler(const std::string& value);

// --token-file, --tls-cert, --tls-key, --tls-ca and --tls-client-auth, the
// same on every command, into *o (common/security.h).
void AddSecurityFlags(FlagSet& flags, SecurityOptions* o);
// Those flags as arguments, for a child process (cohort local).
std::vector<std::string> SecurityArgs(const SecurityOptions& o);

}  // namespace cohort

#endif  // COHORT_CLI_CLUSTER_COMMANDS_H_
