// Confines the ports Gloo listens on to a range a firewall can open
// (--collective-ports=LO-HI).
//
// Gloo (Debian's 2022-05 snapshot) opens one listening socket per peer
// connection, bound to port 0, inside Pair's constructor, and offers no
// option for the port. This module defines bind(2) for the process: a call
// with port 0 made on a thread inside a PortRangeScope tries the range's
// ports instead (from a random start, skipping those in use); every other
// call goes straight to the C library's bind. Pairs are created on the
// thread that calls connectFullMesh, so scoping that call is enough.
//
// Thread-safe: the scope is per thread; nothing else is shared.
#ifndef COHORT_WORKER_COMM_PORT_RANGE_H_
#define COHORT_WORKER_COMM_PORT_RANGE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

struct PortRange {
  int lo = 0;  // 0: no range (any free port)
  int hi = 0;
  bool empty() const { return lo == 0; }
  int size() const { return hi - lo + 1; }
};

// "LO-HI" with 1 <= LO <= HI <= 65535; "" is no range. INVALID_ARGUMENT
// naming `flag` and the text otherwise.
absl::StatusOr<PortRange> ParsePortRange(absl::string_view text,
                                         absl::string_view flag);

// While alive, binds to port 0 on this thread take a port of `range`
// instead. Nests: the innermost scope wins. An empty range changes nothing.
class PortRangeScope {
 public:
  explicit PortRangeScope(PortRange range);
  ~PortRangeScope();
  PortRangeScope(const PortRangeScope&) = delete;
  PortRangeScope& operator=(const PortRangeScope&) = delete;

  // Whether a bind in this scope found every port of the range taken.
  bool exhausted() const;

 private:
  PortRange previous_;
  bool previous_exhausted_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_PORT_RANGE_H_
