// Keepalive and reconnection settings of cohort's gRPC connections, for
// both ends in one place: a server must accept the pings its clients send,
// or it answers them with GOAWAY "too_many_pings" and drops the connection.
//
// Why they matter: a network partition that drops packets leaves a TCP
// connection up. Calls on it time out, but gRPC keeps using it, and once
// the partition heals the kernel resends only at its retransmission
// back-off (4 s after a 10 s partition). Keepalive pings close such a
// connection. The next one must then be made promptly, which gRPC's
// defaults do not do: a connection attempt may take 20 s, during which a
// SYN lost to the partition is resent only 1, 3, 7 and 15 s after the
// first, and the pause between attempts grows to 2 minutes.
//
// Thread safety: stateless functions.
#ifndef COHORT_CLIENT_KEEPALIVE_H_
#define COHORT_CLIENT_KEEPALIVE_H_

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"

namespace cohort {

// A heartbeat's deadline, and its connection's ping interval, for
// heartbeats every `interval`: the interval, within [200 ms, 10 s].
absl::Duration HeartbeatDeadline(absl::Duration interval);

// Every other connection (the coordinator's other calls, the shards'
// pushes and pulls): a peer that answers no ping for kDataKeepaliveTime plus
// as long again is gone, and its connection is closed, instead of after a
// call's deadline or TCP's retransmissions (15 minutes).
inline constexpr absl::Duration kDataKeepaliveTime = absl::Seconds(10);
void AddDataKeepalive(grpc::ChannelArguments& args);

// The heartbeat connection of a worker or shard to the coordinator, for
// heartbeats every `interval` (HeartbeatDeadline): its own connection, so
// that heartbeats never queue behind large calls; a ping every interval
// (gRPC sends a client's at most one a second), the connection closed when
// one goes unanswered for an interval (and by the kernel when sent data
// goes unacknowledged that long: gRPC sets TCP_USER_TIMEOUT); and, while
// it cannot be made, a connection attempt every quarter interval (at least
// 100 ms, gRPC's floor, and at most 1 s), each given as long. A heartbeat
// waiting for the connection (wait_for_ready) thus goes out within about a
// quarter interval of the network's return. The price: a handshake (TCP
// and TLS) must complete within that quarter interval, or the connection
// is never made; over such a slow link, raise cluster.heartbeat_interval_ms.
grpc::ChannelArguments HeartbeatChannelArguments(absl::Duration interval);

// Servers (the coordinator, the shards): accept pings as often as a
// heartbeat connection sends them, with or without calls in flight, and
// ping idle clients every kDataKeepaliveTime, so that connections of
// clients cut off for good are closed.
void AcceptKeepalivePings(grpc::ServerBuilder& builder);

}  // namespace cohort

#endif  // COHORT_CLIENT_KEEPALIVE_H_
