// Listen addresses of cohort's servers: parsing HOST:PORT, resolving it for
// a listening socket, and a bind probe.
//
// gRPC reports a failed bind only as a log line and a null server, so the
// coordinator first binds a plain socket itself and turns the errno into a
// clear error ("cannot listen on 127.0.0.1:7000: address already in use")
// before gRPC logs anything. Pure functions, thread-safe.
#ifndef COHORT_COMMON_LISTEN_H_
#define COHORT_COMMON_LISTEN_H_

#include <netdb.h>

#include <memory>
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

// The addresses `a` resolves to for a listening stream socket (passive,
// numeric port, any family). INVALID_ARGUMENT "cannot listen on `where`:
// host ... does not resolve" otherwise.
using AddrInfoList = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;
absl::StatusOr<AddrInfoList> ResolveForListen(const ListenAddress& a,
                                              absl::string_view where);

// strerror(err), starting in lower case, for the middle of a message.
std::string ErrnoText(int err);

}  // namespace cohort

#endif  // COHORT_COMMON_LISTEN_H_
