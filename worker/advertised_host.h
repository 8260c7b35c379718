// The address a worker advertises to its peers for the all-reduce, and what
// it says when its peers cannot be reached. Pure functions apart from name
// resolution; thread-safe.
#ifndef COHORT_WORKER_ADVERTISED_HOST_H_
#define COHORT_WORKER_ADVERTISED_HOST_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"

namespace cohort {

// This machine's host name ("localhost" if it has none), shown beside the
// advertised address.
std::string HostName();

// The address peers reach this worker on, as Gloo will bind and advertise
// it, in numeric form: `flag` (--host: a name, or an address that may come
// in brackets) resolved here, else the local address of this machine's
// route to `coordinator` (common/net_address.h). INVALID_ARGUMENT naming
// --host when it does not resolve.
absl::StatusOr<std::string> AdvertisedHost(const std::string& flag,
                                           const std::string& coordinator);

// The late message of a worker (advertising `host`) that could not connect
// to its peers: both ends' addresses, and where to look.
std::string UnreachablePeersHint(const std::string& host,
                                 const JoinResponse& join);

}  // namespace cohort

#endif  // COHORT_WORKER_ADVERTISED_HOST_H_
