// SIGTERM and SIGINT for `cohort train` and `cohort worker`: the first one
// asks training to stop after the step in flight, with a final checkpoint
// (TrainOptions::stop_signal), which is what a Kubernetes pod's termination
// grace period is for; a second one ends the process at once.
#ifndef COHORT_CLI_STOP_SIGNAL_H_
#define COHORT_CLI_STOP_SIGNAL_H_

#include <atomic>

namespace cohort {

// Installs the handlers (once per process) and returns the flag they set.
const std::atomic<bool>* InstallStopSignal();

}  // namespace cohort

#endif  // COHORT_CLI_STOP_SIGNAL_H_
