// Addresses that peers on other hosts dial: which local address a process
// advertises, whether an address is loopback, and HOST:PORT text with IPv6
// brackets done one way everywhere.
//
// A worker or shard that advertises its host name fails on every machine
// whose /etc/hosts maps that name to 127.0.1.1 (Debian's default) or to
// nothing (a container's random name). The address the kernel would use to
// reach the coordinator is the one that works for every peer routed the
// same way, so it is the default. Pure functions, thread-safe.
#ifndef COHORT_COMMON_NET_ADDRESS_H_
#define COHORT_COMMON_NET_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// "[fd77::1]" -> "fd77::1"; anything else unchanged.
std::string StripBrackets(absl::string_view host);

// HOST:PORT with an IPv6 host in brackets ("[fd77::1]:29500"), whether or
// not `host` came with them.
std::string JoinHostPort(absl::string_view host, int port);

// The host of "HOST:PORT" ("[::1]:7000" -> "::1"); "" without a colon.
std::string HostOfHostPort(absl::string_view host_port);

// Whether `host` (bracketed or not) is a loopback literal: 127.0.0.0/8,
// ::1, ::ffff:127.x.y.z, or the name "localhost". Other names are not
// resolved: the caller decides what a name means.
bool IsLoopbackHost(absl::string_view host);

// Whether `host` is a wildcard a listener binds every interface with
// ("", 0.0.0.0, ::, [::]).
bool IsWildcardHost(absl::string_view host);

// The numeric local address this machine would send from to reach
// `host_port` (a name or literal, IPv6 bracketed): the route's source, found
// by connecting a UDP socket, which sends nothing. UNAVAILABLE naming
// `host_port` when it does not resolve or no route leads there.
absl::StatusOr<std::string> LocalAddressToward(absl::string_view host_port);

// The address to advertise to peers when none is given: the local address
// toward the coordinator at `coordinator` (HOST:PORT). When the coordinator
// is named (not a loopback literal) but the name leads to loopback here (an
// /etc/hosts line such as "127.0.1.1 node1" on the coordinator's own node),
// other nodes resolve the same name to a real address and would dial this
// process's loopback: the address of the default route's interface is
// taken instead, where there is one.
absl::StatusOr<std::string> DefaultAdvertisedAddress(
    absl::string_view coordinator);

// The host part of a gRPC peer string ("ipv4:10.0.0.5:41234",
// "ipv6:[fd77::1]:41234", "ipv6:%5B::1%5D:41234"); "" for other kinds
// ("unix:...").
std::string HostOfGrpcPeer(absl::string_view peer);

}  // namespace cohort

#endif  // COHORT_COMMON_NET_ADDRESS_H_
