// The coordinator daemon: a gRPC server for one job that forms the world
// (rendezvous), serves the KV store that bootstraps the collectives, hands
// out per-epoch sampler seeds, watches heartbeats, answers status and
// metrics, and writes the job's report when it ends. It also serves
// grpc.health.v1.Health (SERVING while it can serve, NOT_SERVING from the
// start of Shutdown) and gRPC server reflection, so stock tools work. With
// metrics_listen, a plaintext HTTP server also gives Prometheus metrics and
// a dashboard (server/metrics_exporter.h, server/dashboard.h).
//
// The class is CoordinatorServer, not Coordinator: the generated service in
// proto/coordinator.grpc.pb.h already owns the name cohort::Coordinator.
//
// Ownership and threads: the server owns the job state, the gRPC server and
// its threads. All methods are thread-safe; Wait blocks its caller and may
// run while another thread calls Shutdown, which makes it return.
#ifndef COHORT_SERVER_COORDINATOR_H_
#define COHORT_SERVER_COORDINATOR_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/dir_lock.h"
#include "common/security.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace cohort {

class HealthService;
class HttpServer;
class JobTracker;
class MetricsHistory;

struct CoordinatorOptions {
  // A validated spec; Start fills the ClusterSpec defaults (proto/job.proto)
  // and checks the cluster fields again, as this layer cannot assume which
  // loader produced the spec.
  JobSpec job;
  // HOST:PORT; port 0 picks a free one (see port()).
  std::string listen = "127.0.0.1:0";
  // Where Wait writes the JSON report; empty: no report.
  std::string report_path;
  // Keep answering (status, metrics) after the job ends, until Stop.
  bool serve_after_done = false;
  // Job token and TLS (common/security.h): every method but the health
  // service's needs the token when security.token_file is set.
  SecurityOptions security;
  // HOST:PORT of a second, plaintext server with only the health service
  // (and reflection), for probes that cannot speak TLS or carry the token
  // (e.g. a kubelet); it answers health checks without reading their
  // requests (server/health_service.h). Empty: none.
  std::string health_listen;
  // A directory for the coordinator's durable state (created if missing):
  // restarted on the same one, the coordinator carries on with the same
  // generation, workers and epoch numbers, and its workers keep training
  // through its absence (cluster.coordinator_grace_ms). Empty: none.
  // All-reduce jobs only, for now.
  std::string state_dir;
  // HOST:PORT of a plaintext HTTP server (no token, no TLS: bind it where
  // only trusted readers reach) with Prometheus metrics at /metrics, the
  // dashboard at /, the status as JSON at /api/status and the dashboard's
  // history at /api/history (server/metrics_history.h). Empty: none.
  std::string metrics_listen;
  // Bounds on the calls that block, Join and KvWait (server/call_limiter.h
  // says why): at most this many at once from one client connection
  // (cohort coordinator --max-blocking-calls-per-connection) ...
  int max_blocking_calls_per_peer = 32;
  // ... and from all clients together; 0: 256 plus 4 per
  // cluster.max_workers (each worker's Join and its KV waits fit).
  int max_blocking_calls = 0;
};

class CoordinatorServer {
 public:
  // Binds and starts serving. A bad cluster field or listen address, or an
  // unreadable token or TLS file, is INVALID_ARGUMENT; an address that
  // cannot be bound fails at once with UNAVAILABLE "cannot listen on
  // HOST:PORT: address already in use" (or the reason the system gave).
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      CoordinatorOptions options);
  ~CoordinatorServer();  // Shutdown
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const { return port_; }
  std::string address() const;  // HOST:PORT with the bound port
  // The health-only server's bound port; 0 without health_listen.
  int health_port() const { return health_port_; }
  // The metrics server's bound port; 0 without metrics_listen.
  int metrics_port() const;

  // Blocks until the job ends (SUCCEEDED, FAILED or STOPPED) and its
  // surviving workers have heard so (at most two heartbeat intervals plus a
  // second); with serve_after_done, until a Stop RPC or Shutdown instead.
  // Writes the report (if report_path) atomically before returning, once.
  // Returns the final state.
  JobState Wait();
  // Health NOT_SERVING, ends a running job as STOPPED, makes blocked calls
  // return (UNAVAILABLE or ABORTED), stops the gRPC server within about a
  // second. Idempotent.
  void Shutdown();

  StatusResponse Status() const;
  MetricsResponse Metrics() const;
  // The outcome of writing the report (OK before Wait or without a path).
  absl::Status report_status() const;

 private:
  class Service;
  CoordinatorServer(CoordinatorOptions options, std::string host,
                    TokenCheck token_check);
  absl::Status Serve(std::shared_ptr<grpc::ServerCredentials> credentials);
  absl::Status ServeHealth();
  absl::Status ServeMetrics();
  void SampleHistory();
  void WriteReportOnce();

  const CoordinatorOptions options_;
  const std::string host_;
  // Also checked for server reflection (server/reflection_gate.h).
  const TokenCheck token_check_;
  int port_ = 0;
  // --state-dir's lock, held for the server's life (common/dir_lock.h).
  std::unique_ptr<DirectoryLock> state_lock_;
  std::unique_ptr<JobTracker> tracker_;
  // What the dashboard draws; also fed by finished workers' results.
  std::unique_ptr<MetricsHistory> history_;
  // grpc.health.v1 on the main port and on health_listen's
  // (server/health_service.h says why not gRPC's own).
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<HealthService> probe_health_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int health_port_ = 0;
  std::unique_ptr<grpc::Server> health_server_;  // health_listen's
  // metrics_listen's HTTP server, and the thread that samples history_
  // once a second.
  std::unique_ptr<HttpServer> metrics_server_;
  std::thread history_thread_;

  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool report_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_sampling_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status report_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVER_COORDINATOR_H_
