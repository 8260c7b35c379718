// `cohort coordinator` and `cohort worker`: the two daemons of a job.
#include "cli/cluster_commands.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/devices.h"
#include "cli/flags.h"
#include "cli/launch_env.h"
#include "cli/output_paths.h"
#include "cli/stop_signal.h"
#include "cli/train_command.h"
#include "common/prometheus.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "server/coordinator.h"
#include "server/ps/shard_process.h"
#include "worker/comm/port_range.h"
#include "worker/worker_metrics.h"
#include "worker/worker_process.h"

namespace cohort {
namespace {

// --metrics-listen=HOST:PORT into *listen; `what` says what it serves.
void AddMetricsListenFlag(FlagSet& flags, std::string* listen,
                          const std::string& what) {
  flags.String("metrics-listen", listen,
               absl::StrCat("HOST:PORT of a plaintext HTTP server with ", what,
                            "; it needs no token and has no TLS, so bind it "
                            "where only trusted readers reach, e.g. "
                            "127.0.0.1:9400 (default: none)"));
}

}  // namespace

absl::Status RunCoordinator(const std::vector<std::string>& args, bool* help,
                            int* exit_code) {
  std::string job, listen, report;
  bool serve_after_done = false;
  FlagSet flags("coordinator");
  flags.String("job", &job, "job spec (.textproto); required");
  flags.String("listen", &listen,
               "HOST:PORT to serve on (default 0.0.0.0:29400, or the port of "
               "a SLURM step's or torchrun-style environment)");
  flags.String("report", &report,
               "write the job's JSON report here at the end");
  flags.Bool("serve-after-done", &serve_after_done,
             "keep answering status and metrics after the job ends, until "
             "cohort stop");
  SecurityOptions security;
  AddSecurityFlags(flags, &security);
  std::string health_listen;
  flags.String("health-listen", &health_listen,
               "HOST:PORT of a second, plaintext server with only the health "
               "service (for probes without the token or TLS)");
  std::string state_dir;
  flags.String("state-dir", &state_dir,
               "keep the job's state here, so that a coordinator restarted "
               "on it carries on (all-reduce jobs)");
  std::string metrics_listen;
  AddMetricsListenFlag(flags, &metrics_listen,
                       "Prometheus metrics at /metrics, a dashboard at /, "
                       "the status as JSON at /api/status");
  int64_t blocking_per_connection =
      CoordinatorOptions().max_blocking_calls_per_peer;
  flags.Int("max-blocking-calls-per-connection", &blocking_per_connection,
            "calls that wait (Join, KvWait) one client connection may have "
            "at once; more are refused with RESOURCE_EXHAUSTED (default 32; "
            "raise it when a proxy carries many workers' calls over one "
            "connection)",
            1, 1 << 20);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (job.empty()) return absl::InvalidArgumentError("--job=FILE is required");
  if (listen.empty()) {
    ASSIGN_OR_RETURN(listen,
                     ListenFromEnvironment("coordinator", "0.0.0.0:29400"));
  }
  CoordinatorOptions o;
  ASSIGN_OR_RETURN(o.job, LoadJobSpec(job));
  if (!report.empty()) {
    CommandInputs inputs;
    inputs.files.emplace_back("the --job file", job);
    RETURN_IF_ERROR(CheckOutputFlag("--report", report, inputs));
  }
  o.listen = listen;
  o.report_path = report;
  o.state_dir = state_dir;
  o.serve_after_done = serve_after_done;
  o.security = security;
  o.health_listen = health_listen;
  o.metrics_listen = metrics_listen;
  o.max_blocking_calls_per_peer = blocking_per_connection;
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> c,
                   CoordinatorServer::Start(o));
  std::fprintf(stderr, "cohort coordinator: job \"%s\" serving on %s\n",
               o.job.name().c_str(), c->address().c_str());
  if (c->metrics_port() != 0) {
    const std::string host =
        metrics_listen.substr(0, metrics_listen.rfind(':'));
    std::fprintf(stderr,
                 "cohort coordinator: dashboard on http://%s:%d/, metrics at "
                 "/metrics\n",
                 host.c_str(), c->metrics_port());
  }
  const JobState state = c->Wait();
  const StatusResponse s = c->Status();
  c->Shutdown();
  std::fprintf(
      stderr, "cohort coordinator: job %s%s\n", JobState_Name(state).c_str(),
      s.reason().empty() ? "" : absl::StrCat(": ", s.reason()).c_str());
  *exit_code = state == SUCCEEDED ? 0 : 1;
  // A report that could not be written loses the result: not a success.
  return c->report_status();
}

absl::Status RunWorkerCommand(const std::vector<std::string>& args,
                              bool* help) {
  WorkerOptions o;
  std::string devices, replicas;
  int64_t threads = 0, connect_timeout_s = 60;
  FlagSet flags("worker");
  flags.String("coordinator", &o.coordinator,
               "the coordinator's HOST:PORT; required unless a SLURM step or "
               "a torchrun-style environment (MASTER_ADDR...) says it");
  flags.String("devices", &devices,
               "cpu:N, gpu:all or gpu:I,J,... (default: every GPU if there "
               "is one, else cpu:1)");
  flags.String("replicas", &replicas, "older name of --devices");
  flags.Int("threads", &threads,
            "compute threads in all (default: one per replica)", 1, 1024);
  flags.String("data-dir", &o.data_dir,
               "data set directory (overrides the spec)");
  flags.String("host", &o.host,
               "address peers reach this worker on (default: the local "
               "address of the route to the coordinator)");
  std::string collective_ports;
  flags.String("collective-ports", &collective_ports,
               "LO-HI: the ports Gloo listens on for peers, one per peer "
               "while connecting (default: any free port)");
  flags.Int("connect-timeout", &connect_timeout_s,
            "seconds to keep trying to reach the coordinator (default 60)", 1,
            86400);
  flags.Bool("quiet", &o.quiet, "no progress output");
  std::string straggler;
  flags.String("straggler", &straggler,
               "RANK:FACTOR: if this worker gets rank RANK, it runs FACTOR "
               "times slower (to study stragglers)");
  int64_t min_step_ms = 0;
  flags.Int("min-step-ms", &min_step_ms,
            "each step's forward and backward take at least this long "
            "(sleeping the rest): models workers on machines of their own "
            "when several share a few cores (default 0)",
            0, 3600000);
  flags.String("timeline", &o.timeline_path,
               "write a Chrome trace of every step's phases to this file");
  AddSecurityFlags(flags, &o.security);
  std::string metrics_listen;
  AddMetricsListenFlag(flags, &metrics_listen,
                       "this worker's Prometheus metrics at /metrics");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (o.coordinator.empty()) {
    ASSIGN_OR_RETURN(o.coordinator, CoordinatorFromEnvironment("worker"));
  }
  if (o.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator=HOST:PORT is required");
  }
  ASSIGN_OR_RETURN(o.collective_ports,
                   ParsePortRange(collective_ports, "--collective-ports"));
  if (!o.timeline_path.empty()) {
    RETURN_IF_ERROR(CheckOutputFlag("--timeline", o.timeline_path, {}));
  }
  WorkerMetrics metrics;
  std::unique_ptr<HttpServer> metrics_server;  // stops before `metrics` goes
  if (!metrics_listen.empty()) {
    ASSIGN_OR_RETURN(metrics_server,
                     ServeMetrics(metrics_listen, "--metrics-listen",
                                  [&metrics] { return metrics.Text(); }));
    o.metrics = &metrics;
  }
  if (!straggler.empty()) {
    ASSIGN_OR_RETURN(const Straggler s, ParseStraggler(straggler));
    o.slowdown_rank = s.rank;
    o.slowdown = s.factor;
  }
  ASSIGN_OR_RETURN(const Devices d, ResolveDevices(devices, replicas));
  o.replicas = d.replicas();
  o.gpus = d.gpus;
  o.threads = static_cast<int>(threads);
  o.min_step_seconds = min_step_ms / 1000.0;
  o.connect_timeout = absl::Seconds(connect_timeout_s);
  o.live_progress = isatty(STDERR_FILENO);
  o.stop_signal = InstallStopSignal();
  return RunWorker(o);
}

absl::StatusOr<Straggler> ParseStraggler(const std::string& value) {
  const size_t colon = value.find(':');
  Straggler s;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(value.substr(0, colon), &s.rank) || s.rank < 0 ||
      !absl::SimpleAtod(value.substr(colon + 1), &s.factor) ||
      !(s.factor >= 1.0 && s.factor <= 1000.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler must look like RANK:FACTOR with RANK >= 0 and FACTOR in "
        "[1, 1000], got \"",
        value, "\""));
  }
  return s;
}

void AddSecurityFlags(FlagSet& flags, SecurityOptions* o) {
  flags.String("token-file", &o->token_file,
               "file holding the job token, a shared secret: servers refuse "
               "calls without it (health checks excepted), clients send it");
  flags.String("tls-cert", &o->tls_cert,
               "PEM certificate: a server's own (turns TLS on); a client "
               "presents it when a server asks (--tls-client-auth)");
  flags.String("tls-key", &o->tls_key, "PEM private key of --tls-cert");
  flags.String("tls-ca", &o->tls_ca,
               "PEM CA certificate: clients accept only servers it signed "
               "(turns TLS on); with --tls-client-auth, servers accept only "
               "clients it signed");
  flags.Bool("tls-client-auth", &o->tls_client_auth,
             "servers require a client certificate signed by --tls-ca "
             "(mutual TLS)");
}

std::vector<std::string> SecurityArgs(const SecurityOptions& o) {
  std::vector<std::string> args;
  auto add = [&](const char* flag, const std::string& value) {
    if (!value.empty()) args.push_back(absl::StrCat("--", flag, "=", value));
  };
  add("token-file", o.token_file);
  add("tls-cert", o.tls_cert);
  add("tls-key", o.tls_key);
  add("tls-ca", o.tls_ca);
  if (o.tls_client_auth) args.push_back("--tls-client-auth");
  return args;
}

absl::Status RunPsCommand(const std::vector<std::string>& args, bool* help) {
  ShardProcessOptions o;
  int64_t connect_timeout_s = 60;
  bool quiet = false;
  FlagSet flags("ps");
  flags.String("coordinator", &o.coordinator,
               "the coordinator's HOST:PORT; required");
  flags.String("listen", &o.listen,
               "HOST:PORT to serve workers on (default 0.0.0.0:0, any port)");
  flags.String("host", &o.advertise_host,
               "address workers reach this shard on (default: the --listen "
               "host if it names one, else the local address of the route "
               "to the coordinator)");
  flags.Int("connect-timeout", &connect_timeout_s,
            "seconds to keep trying to reach the coordinator (default 60)", 1,
            86400);
  flags.Bool("quiet", &quiet, "no log lines");
  AddSecurityFlags(flags, &o.security);
  AddMetricsListenFlag(flags, &o.metrics_listen,
                       "this shard's Prometheus metrics at /metrics");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (o.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator=HOST:PORT is required");
  }
  o.connect_timeout = absl::Seconds(connect_timeout_s);
  return RunShardProcess(o);
}

}  // namespace cohort
