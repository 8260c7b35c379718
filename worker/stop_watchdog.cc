#include "worker/stop_watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cohort {

StopWatchdog::~StopWatchdog() {
  cancel_.Notify();
  if (thread_.joinable()) thread_.join();
}

void StopWatchdog::Arm(const absl::Status& why) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, why] {
    if (cancel_.WaitForNotificationWithTimeout(grace_)) return;
    std::fprintf(stderr, "cohort worker: %s\n",
                 std::string(why.message()).c_str());
    std::fflush(stderr);
    std::_Exit(1);
  });
}

}  // namespace cohort
