#include "server/ps/shard_process.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "common/logging.h"
#include "common/net_address.h"
#include "common/prometheus.h"
#include "common/status_macros.h"
#include "server/metrics_exporter.h"
#include "server/ps/shard_memory.h"
#include "server/ps/shard_server.h"

namespace cohort {
namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// The host workers dial this shard on: --host; else the --listen host when
// it names one interface; else the local address of this machine's route to
// the coordinator (the host name fails wherever /etc/hosts maps it to
// 127.0.1.1 or to nothing).
absl::StatusOr<std::string> AdvertisedHost(const ShardProcessOptions& o) {
  if (!o.advertise_host.empty()) return StripBrackets(o.advertise_host);
  const std::string listen_host = HostOfHostPort(o.listen);
  if (!IsWildcardHost(listen_host)) return listen_host;
  absl::StatusOr<std::string> local = DefaultAdvertisedAddress(o.coordinator);
  if (!local.ok()) {
    return absl::UnavailableError(
        absl::StrCat(local.status().message(),
                     "; give --host the address workers reach this shard on"));
  }
  return *local;
}

std::string ShardId() {
  std::random_device rd;
  return absl::StrCat(Hostname(), ":", getpid(), ":",
                      absl::Hex(static_cast<uint64_t>(rd()) << 32 | rd()));
}

// Heartbeats until the job ends or the coordinator is gone for too long.
absl::Status HeartbeatLoop(CoordinatorClient& coordinator, ShardServer& server,
                           const ClusterSpec& cluster) {
  const absl::Duration interval = absl::Milliseconds(
      cluster.heartbeat_interval_ms() > 0 ? cluster.heartbeat_interval_ms()
                                          : 1000);
  const int misses =
      cluster.heartbeat_misses() > 0 ? cluster.heartbeat_misses() : 3;
  const absl::Duration give_up = interval * misses + absl::Seconds(5);
  absl::Time last_ok = absl::Now();
  absl::Status last_error;
  // On a fixed schedule, as a worker's: each beat waits up to an interval
  // for the connection, so one is waiting whenever the coordinator is away.
  absl::Time next = absl::Now();
  while (true) {
    next = std::max(next + interval, absl::Now());
    absl::SleepFor(next - absl::Now());
    absl::StatusOr<ShardHeartbeatResponse> r =
        coordinator.ShardHeartbeat(server.TakeStats());
    if (!r.ok()) {
      last_error = r.status();
      if (r.status().code() != absl::StatusCode::kUnavailable &&
          r.status().code() != absl::StatusCode::kDeadlineExceeded) {
        return r.status();  // refused: e.g. not a registered shard
      }
      if (absl::Now() - last_ok > give_up) {
        return absl::UnavailableError(
            absl::StrCat("lost the coordinator at ", coordinator.address(),
                         " for ", absl::FormatDuration(absl::Now() - last_ok),
                         ": ", last_error.message()));
      }
      continue;
    }
    last_ok = absl::Now();
    // The workers' progress since the dead shard's last heartbeat, which
    // its checkpoint may lack, reaches a replacement here.
    server.RaiseSyncClocks(r->workers_clock());
    if (!r->stop()) continue;
    if (r->state() == FAILED) {
      return absl::AbortedError(absl::StrCat("the job failed: ", r->reason()));
    }
    LOG(INFO) << "job ended (" << JobState_Name(r->state())
              << "); shard exiting";
    return absl::OkStatus();
  }
}

absl::Status RegisterAndServe(const ShardProcessOptions& options,
                              ShardServer& server) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<CoordinatorClient> coordinator,
      CoordinatorClient::Create(options.coordinator, options.security));
  ASSIGN_OR_RETURN(const std::string host, AdvertisedHost(options));
  RegisterShardRequest req;
  req.set_protocol_version(Protocol::CURRENT);
  req.set_shard_id(ShardId());
  req.set_address(JoinHostPort(host, server.port()));
  req.set_host(Hostname());
  req.set_pid(getpid());
  ASSIGN_OR_RETURN(RegisterShardResponse reg,
                   coordinator->RegisterShard(req, options.connect_timeout));
  // Its slice must fit before anything is allocated for it.
  const absl::Status fits = CheckShardMemory(
      reg.job(), reg.shard_index(), reg.num_shards(), options.available_memory);
  absl::StatusOr<std::string> assigned =
      fits.ok() ? server.Assign(reg) : absl::StatusOr<std::string>(fits);
  if (!assigned.ok()) {
    // Serving without the dead shard's parameters would train on garbage:
    // the job fails, and says why.
    const absl::Status refused(
        assigned.status().code(),
        absl::StrCat("shard ", reg.shard_index(), " at ", req.address(),
                     " cannot serve: ", assigned.status().message()));
    coordinator
        ->ShardHeartbeat(server.TakeStats(), std::string(refused.message()))
        .IgnoreError();
    return refused;
  }
  LOG(INFO) << *assigned << " (" << req.shard_id() << ") serving at "
            << req.address() << " (" << SecuritySummary(options.security)
            << ")";
  const ClusterSpec& cluster = reg.job().cluster();
  coordinator->FollowHeartbeats(cluster);
  return HeartbeatLoop(*coordinator, server, cluster);
}

}  // namespace

absl::Status RunShardProcess(const ShardProcessOptions& options) {
  ShardServerOptions so;
  so.listen = options.listen;
  so.security = options.security;
  ASSIGN_OR_RETURN(std::unique_ptr<ShardServer> server, ShardServer::Start(so));
  std::unique_ptr<HttpServer> metrics;  // stops before `server` goes
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(
        metrics,
        ServeMetrics(options.metrics_listen, "--metrics-listen",
                     [&server] { return ShardMetricsText(server->Stats()); }));
  }
  const absl::Status s = RegisterAndServe(options, *server);
  server->Shutdown();
  return s;
}

}  // namespace cohort
