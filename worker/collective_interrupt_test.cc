#include "worker/collective_interrupt.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "worker/comm/connect_abort.h"

namespace cohort {
namespace {

TEST(CollectiveInterrupt, AbortsAConnectInProgress) {
  CollectiveInterrupt interrupt;
  ConnectAbort connect;
  {
    ScopedInterruptible attached(&interrupt, &connect);
    EXPECT_TRUE(connect.status().ok());
    interrupt.Interrupt(absl::AbortedError("generation 4 is over"));
    EXPECT_EQ(connect.status().code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(absl::StrContains(connect.status().message(), "generation 4"));
  }
}

TEST(CollectiveInterrupt, AVerdictBeforeTheConnectAbortsItWhenAttached) {
  CollectiveInterrupt interrupt;
  interrupt.Interrupt(absl::AbortedError("generation 5 is over"));
  ConnectAbort connect;
  ScopedInterruptible attached(&interrupt, &connect);
  EXPECT_TRUE(absl::StrContains(connect.status().message(), "generation 5"));
}

TEST(CollectiveInterrupt, LeavesADetachedConnectAlone) {
  CollectiveInterrupt interrupt;
  ConnectAbort connect;
  { ScopedInterruptible attached(&interrupt, &connect); }
  interrupt.Interrupt(absl::AbortedError("generation 6 is over"));
  EXPECT_TRUE(connect.status().ok());
}

}  // namespace
}  // namespace cohort
