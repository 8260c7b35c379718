#include "worker/stop_watchdog.h"

#include <sys/wait.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// Runs `body` in a child process; returns its exit status.
template <typename F>
int ExitStatusOf(F body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(StopWatchdog, ExitsAfterTheGrace) {
  EXPECT_EQ(ExitStatusOf([] {
              StopWatchdog w(absl::Milliseconds(50));
              w.Arm(absl::AbortedError("stopped"));
              absl::SleepFor(absl::Seconds(5));  // a stuck collective
            }),
            1);
}

// A worker that moved on (its generation's watchdog destroyed) must not
// die from the stale stop. The detached timer this replaces killed it 3 s
// later. The grace is long enough that a busy machine does not delay the
// destruction past it (50 ms was not), and the pause outlasts the grace.
TEST(StopWatchdog, DestroyingItCancelsTheExit) {
  EXPECT_EQ(ExitStatusOf([] {
              {
                StopWatchdog w(absl::Seconds(1));
                w.Arm(absl::FailedPreconditionError("generation 1 is over"));
              }
              absl::SleepFor(absl::Milliseconds(1500));  // the next generation
            }),
            0);
}

}  // namespace
}  // namespace cohort
