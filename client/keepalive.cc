#include "client/keepalive.h"

#include <algorithm>

namespace cohort {
namespace {

// Heartbeat deadlines, and so the heartbeat connection's pings, are never
// shorter than this.
constexpr absl::Duration kMinHeartbeatDeadline = absl::Milliseconds(200);

int Millis(absl::Duration d) {
  return static_cast<int>(absl::ToInt64Milliseconds(d));
}

}  // namespace

absl::Duration HeartbeatDeadline(absl::Duration interval) {
  return std::clamp(interval, kMinHeartbeatDeadline, absl::Seconds(10));
}

void AddDataKeepalive(grpc::ChannelArguments& args) {
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(kDataKeepaliveTime));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(kDataKeepaliveTime));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC holds back a client's pings after two without a call's data; an
  // idle connection must still be watched.
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

grpc::ChannelArguments HeartbeatChannelArguments(absl::Duration interval) {
  const absl::Duration ping = HeartbeatDeadline(interval);
  // gRPC makes a connection attempt last at least the larger of its
  // minimum and its backoff, and gives up on none sooner than 100 ms.
  const absl::Duration attempt =
      std::clamp(ping / 4, absl::Milliseconds(100), absl::Milliseconds(1000));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(ping));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(ping));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, Millis(attempt));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, Millis(attempt));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Millis(attempt));
  // Not shared with another channel to the same address (gRPC pools
  // connections by address and arguments).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

void AcceptKeepalivePings(grpc::ServerBuilder& builder) {
  // Half the closest pings, for the jitter of their arrival.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      Millis(kMinHeartbeatDeadline / 2));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             Millis(kDataKeepaliveTime));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             Millis(kDataKeepaliveTime));
}

}  // namespace cohort
