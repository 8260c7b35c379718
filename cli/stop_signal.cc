#include "cli/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace cohort {
namespace {

std::atomic<bool> g_stop{false};

void OnStopSignal(int sig) {
  if (g_stop.exchange(true)) {
    // The second signal: the default action, now.
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  // write(2) is async-signal-safe; stdio is not.
  static const char kMessage[] =
      "cohort: stopping after the step in flight (with a final checkpoint "
      "where this process writes them); signal again to stop at once\n";
  const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
}

}  // namespace

const std::atomic<bool>* InstallStopSignal() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return &g_stop;
}

}  // namespace cohort
