// --workers, --min-workers and --max-workers of the commands that serve a
// coordinator (coordinator, local, launch): registered the same way on
// each, applied by common/spec_workers.h.
//
// Thread safety: functions without shared state.
#ifndef COHORT_CLI_WORKER_COUNT_FLAGS_H_
#define COHORT_CLI_WORKER_COUNT_FLAGS_H_

#include <string>

#include "cli/flags.h"
#include "common/spec_workers.h"

namespace cohort {

// Registers the three flags into `flags`; `otherwise` says what decides
// the counts when none is given ("the spec's cluster section, else 1").
void AddWorkerCountFlags(FlagSet& flags, WorkerCountFlags* f,
                         const std::string& otherwise);

}  // namespace cohort

#endif  // COHORT_CLI_WORKER_COUNT_FLAGS_H_
