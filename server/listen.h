// Listen addresses for the coordinator: parsing HOST:PORT and a bind probe.
//
// gRPC reports a failed bind only as a log line and a null server, so the
// coordinator first binds a plain socket itself and turns the errno into a
// clear error ("cannot listen on 127.0.0.1:7000: address already in use")
// before gRPC logs anything. Pure functions, thread-safe.
#ifndef COHORT_SERVER_LISTEN_H_
#define COHORT_SERVER_LISTEN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

struct ListenAddress {
  std::string host;  // as written, IPv6 with its brackets ("[::1]")
  int port = 0;      // 0: any free port
};

// "HOST:PORT", with HOST a name, an IPv4 address or a bracketed IPv6
// address. INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text);

// Binds (and releases) a socket on every address `a` resolves to, with
// SO_REUSEADDR as gRPC does. UNAVAILABLE "cannot listen on HOST:PORT:
// <reason>" when one is in use or none can be bound; INVALID_ARGUMENT when
// the host does not resolve.
absl::Status ProbeListen(const ListenAddress& a);

}  // namespace cohort

#endif  // COHORT_SERVER_LISTEN_H_
