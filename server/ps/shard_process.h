// `cohort ps`: one parameter-server shard process. Starts a ShardServer,
// registers it with the coordinator (which assigns the shard index and sends
// the job), then heartbeats its statistics until the job ends.
//
// In a job with checkpoints (checkpoint.dir), a shard started while the job
// runs waits (registration is retried) until a shard dies, then takes its
// index and restores that shard's newest checkpoint; if it has none that
// fits, it tells the coordinator, which fails the job with the reason, and
// returns that error without serving. So does a shard whose slice of the
// parameters does not fit this machine's memory (shard_memory.h).
//
// Thread safety: RunShardProcess blocks its caller; the gRPC server serves
// on its own threads.
#ifndef COHORT_SERVER_PS_SHARD_PROCESS_H_
#define COHORT_SERVER_PS_SHARD_PROCESS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/security.h"

namespace cohort {

struct ShardProcessOptions {
  std::string coordinator;  // HOST:PORT
  std::string listen = "0.0.0.0:0";
  // The host workers use to reach this shard. Empty: 127.0.0.1 when the
  // coordinator is on loopback, else this machine's hostname.
  std::string advertise_host;
  // How long registration retries an unreachable coordinator.
  absl::Duration connect_timeout = absl::Seconds(60);
  // The job token and TLS, for both the shard's server and its client to
  // the coordinator (common/security.h).
  SecurityOptions security;
  // HOST:PORT of a plaintext HTTP server with the shard's Prometheus
  // metrics at /metrics (server/metrics_exporter.h, served by
  // common/prometheus.h). Empty: none.
  std::string metrics_listen;
  // Bytes the shard may allocate, for the check that its slice of the
  // parameters fits (shard_memory.h); -1: what the machine has.
  int64_t available_memory = -1;
};

// Runs until the job ends: OK when the coordinator says stop with the job
// SUCCEEDED or STOPPED; an error with the coordinator's reason when it
// FAILED; UNAVAILABLE naming the coordinator when it could not be reached
// for heartbeat_interval * heartbeat_misses + 5 s; the restore's error for
// a replacement that cannot restore. The server is shut down before
// returning.
absl::Status RunShardProcess(const ShardProcessOptions& options);

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_PROCESS_H_
