#include "worker/advertised_host.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net_address.h"

namespace cohort {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

absl::StatusOr<std::string> AdvertisedHost(const std::string& flag,
                                           const std::string& coordinator) {
  if (flag.empty()) {
    absl::StatusOr<std::string> local = DefaultAdvertisedAddress(coordinator);
    if (!local.ok()) {
      return absl::UnavailableError(
          absl::StrCat(local.status().message(),
                       "; give --host the address peers reach this worker on"));
    }
    return *local;
  }
  const std::string host = StripBrackets(flag);
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (error != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host=\"", flag, "\" does not resolve (", gai_strerror(error),
        "): give --host an address or name peers can reach this "
        "worker on, or leave it out to advertise the address "
        "that reaches the coordinator"));
  }
  char numeric[NI_MAXHOST] = {};
  const int named = getnameinfo(found->ai_addr, found->ai_addrlen, numeric,
                                sizeof(numeric), nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(found);
  if (named != 0) return host;
  return std::string(numeric);
}

std::string UnreachablePeersHint(const std::string& host,
                                 const JoinResponse& join) {
  std::vector<std::string> peers;
  for (int r = 0; r < join.worker_addresses_size(); ++r) {
    if (r != join.rank()) {
      peers.push_back(
          absl::StrCat("rank ", r, " at ", join.worker_addresses(r)));
    }
  }
  return absl::StrCat(
      "rank ", join.rank(), " at ", host, " could not reach ",
      peers.empty() ? "its peers" : absl::StrJoin(peers, ", "),
      ": an address is probably unreachable from this host (check --host on "
      "every worker, routes and firewalls, and --collective-ports); leaving "
      "the job");
}

}  // namespace cohort
