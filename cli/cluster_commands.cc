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
#include "cli/training_flags.h"
#include "cli/worker_count_flags.h"
#include "common/http_server.h"
#include "common/spec.h"
#include "common/spec_workers.h"
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
                            "127.0.0.1:9400 (default: none)"),
               "HOST:PORT");
}

}  // namespace

namespace {

struct CoordinatorFlags {
  std::string job, listen, report, health_listen, state_dir, metrics_listen;
  bool serve_after_done = false;
  int64_t blocking_per_connection =
      CoordinatorOptions().max_blocking_calls_per_peer;
  WorkerCountFlags workers;
  SecurityOptions security;
};

void AddCoordinatorFlags(FlagSet& flags, CoordinatorFlags* f) {
  flags.String("job", &f->job, "job spec (.textproto); required", "FILE");
  flags.String("listen", &f->listen,
               "HOST:PORT to serve on (default 0.0.0.0:29400, or the port of "
               "a SLURM step's or torchrun-style environment)",
               "HOST:PORT");
  AddWorkerCountFlags(flags, &f->workers, "the spec's cluster section, else 1");
  flags.String("report", &f->report,
               "write the job's JSON report here at the end", "FILE");
  flags.Bool("serve-after-done", &f->serve_after_done,
             "keep answering status and metrics after the job ends, until "
             "cohort stop");
  AddSecurityFlags(flags, &f->security);
  flags.String("health-listen", &f->health_listen,
               "HOST:PORT of a second, plaintext server with only the health "
               "service (for probes without the token or TLS)",
               "HOST:PORT");
  flags.String("state-dir", &f->state_dir,
               "keep the job's state here, so that a coordinator restarted "
               "on it carries on (all-reduce jobs)",
               "DIR");
  AddMetricsListenFlag(flags, &f->metrics_listen,
                       "Prometheus metrics at /metrics, a dashboard at /, "
                       "the status as JSON at /api/status");
  flags.Int("max-blocking-calls-per-connection", &f->blocking_per_connection,
            "calls that wait (Join, KvWait) one client connection may have "
            "at once; more are refused with RESOURCE_EXHAUSTED (default 32; "
            "raise it when a proxy carries many workers' calls over one "
            "connection)",
            1, 1 << 20);
}

absl::StatusOr<CoordinatorOptions> CoordinatorOptionsFrom(
    const CoordinatorFlags& f) {
  CoordinatorOptions o;
  ASSIGN_OR_RETURN(o.job, LoadJobSpec(f.job));
  RETURN_IF_ERROR(ApplyWorkerCounts(f.workers, o.job.mutable_cluster()));
  if (!f.report.empty()) {
    CommandInputs inputs;
    inputs.files.emplace_back("the --job file", f.job);
    RETURN_IF_ERROR(CheckOutputFlag("--report", f.report, inputs));
  }
  o.listen = f.listen;
  if (o.listen.empty()) {
    ASSIGN_OR_RETURN(o.listen,
                     ListenFromEnvironment("coordinator", "0.0.0.0:29400"));
  }
  o.report_path = f.report;
  o.state_dir = f.state_dir;
  o.serve_after_done = f.serve_after_done;
  o.security = f.security;
  o.health_listen = f.health_listen;
  o.metrics_listen = f.metrics_listen;
  o.max_blocking_calls_per_peer = f.blocking_per_connection;
  return o;
}

// "2 workers (--workers)": how many the job waits for, and what said so,
// since a job that forms with fewer than meant trains on silently.
std::string WorkersLine(const WorkerCountFlags& flags, const ClusterSpec& c) {
  const char* from = flags.any()                  ? "from the flags"
                     : !HasDefaultWorkerCounts(c) ? "the spec's cluster section"
                                                  : "the default; --workers=N "
                                                    "for more";
  return absl::StrCat(DescribeWorkerCounts(c), " (", from, ")");
}

}  // namespace

absl::Status RunCoordinator(const std::vector<std::string>& args, bool* help,
                            int* exit_code) {
  CoordinatorFlags f;
  FlagSet flags("coordinator");
  AddCoordinatorFlags(flags, &f);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (f.job.empty()) {
    return absl::InvalidArgumentError("--job=FILE is required");
  }
  ASSIGN_OR_RETURN(const CoordinatorOptions o, CoordinatorOptionsFrom(f));
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> c,
                   CoordinatorServer::Start(o));
  std::fprintf(stderr, "cohort coordinator: job \"%s\" serving on %s, for %s\n",
               o.job.name().c_str(), c->address().c_str(),
               WorkersLine(f.workers, o.job.cluster()).c_str());
  if (c->metrics_port() != 0) {
    const std::string host =
        f.metrics_listen.substr(0, f.metrics_listen.rfind(':'));
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

namespace {

struct WorkerFlags {
  WorkerOptions o;
  std::string devices, replicas, collective_ports, straggler;
  int64_t threads = 0, connect_timeout_s = 60, min_step_ms = 0;
  TrainingFlags training;
};

void AddWorkerFlags(FlagSet& flags, WorkerFlags* f) {
  flags.String("coordinator", &f->o.coordinator,
               "the coordinator's HOST:PORT; required unless a SLURM step or "
               "a torchrun-style environment (MASTER_ADDR...) says it",
               "HOST:PORT");
  flags.String("devices", &f->devices,
               "cpu:N, gpu:all or gpu:I,J,... (default: every GPU if there "
               "is one, else cpu:1)",
               "DEVICES");
  flags.String("replicas", &f->replicas, "older name of --devices", "DEVICES");
  flags.Int("threads", &f->threads,
            "compute threads in all (default: one per replica)", 1, 1024);
  flags.String("data-dir", &f->o.data_dir,
               "data set directory (default: the spec's data.dir)", "DIR");
  flags.String("host", &f->o.host,
               "address peers reach this worker on (default: the local "
               "address of the route to the coordinator)",
               "ADDRESS");
  flags.String("collective-ports", &f->collective_ports,
               "the ports Gloo listens on for peers, one per peer while "
               "connecting (default: any free port)",
               "LO-HI");
  flags.Int("connect-timeout", &f->connect_timeout_s,
            "seconds to keep trying to reach the coordinator (default 60)", 1,
            86400);
  flags.String("straggler", &f->straggler,
               "if this worker gets rank RANK, it runs FACTOR times slower "
               "(to study stragglers)",
               "RANK:FACTOR");
  flags.Int("min-step-ms", &f->min_step_ms,
            "each step's forward and backward take at least this long "
            "(sleeping the rest): models workers on machines of their own "
            "when several share a few cores (default 0)",
            0, 3600000);
  flags.String("timeline", &f->o.timeline_path,
               "write a Chrome trace of every step's phases to this file",
               "FILE");
  flags.Bool("timeline-layers", &f->o.timeline_layers,
             "with --timeline: also each layer's forward and backward call "
             "(CPU devices)");
  AddSecurityFlags(flags, &f->o.security);
  f->training.Register(flags, TrainingCommand::kWorker);
}

// The options of everything but the outputs, from the parsed flags.
absl::Status CompleteWorkerOptions(WorkerFlags* f) {
  WorkerOptions& o = f->o;
  if (o.coordinator.empty()) {
    ASSIGN_OR_RETURN(o.coordinator, CoordinatorFromEnvironment("worker"));
  }
  if (o.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator=HOST:PORT is required");
  }
  RETURN_IF_ERROR(f->training.Check());
  f->training.ApplyTo(&o);
  ASSIGN_OR_RETURN(o.collective_ports,
                   ParsePortRange(f->collective_ports, "--collective-ports"));
  if (!f->straggler.empty()) {
    ASSIGN_OR_RETURN(const Straggler s, ParseStraggler(f->straggler));
    o.slowdown_rank = s.rank;
    o.slowdown = s.factor;
  }
  ASSIGN_OR_RETURN(const Devices d, ResolveDevices(f->devices, f->replicas));
  o.replicas = d.replicas();
  o.gpus = d.gpus;
  o.threads = static_cast<int>(f->threads);
  o.min_step_seconds = f->min_step_ms / 1000.0;
  o.connect_timeout = absl::Seconds(f->connect_timeout_s);
  o.live_progress = isatty(STDERR_FILENO);
  return absl::OkStatus();
}

// --timeline, --report and --export, before joining: writable, distinct,
// and not the --init-from file. (The job's spec and data are the
// coordinator's to name; the loop checks its checkpoint directory.)
absl::Status CheckWorkerOutputs(const WorkerFlags& f) {
  CommandInputs inputs;
  if (!f.training.init_from.empty()) {
    inputs.files.emplace_back("the --init-from file", f.training.init_from);
  }
  if (!f.training.checkpoint_dir.empty()) {
    inputs.checkpoint_dirs.push_back(f.training.checkpoint_dir);
  }
  std::vector<std::pair<std::string, std::string>> outputs =
      f.training.Outputs();
  if (!f.o.timeline_path.empty()) {
    outputs.emplace_back("--timeline", f.o.timeline_path);
  } else if (f.o.timeline_layers) {
    return absl::InvalidArgumentError(
        "--timeline-layers adds to a timeline: give --timeline=FILE too");
  }
  for (const auto& [flag, path] : outputs) {
    RETURN_IF_ERROR(CheckOutputFlag(flag, path, inputs));
  }
  return CheckDistinctOutputs(outputs);
}

}  // namespace

absl::Status RunWorkerCommand(const std::vector<std::string>& args,
                              bool* help) {
  WorkerFlags f;
  FlagSet flags("worker");
  AddWorkerFlags(flags, &f);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CompleteWorkerOptions(&f));
  RETURN_IF_ERROR(CheckWorkerOutputs(f));
  WorkerMetrics metrics;
  // Declared after `metrics`, so it stops serving before `metrics` goes.
  ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> metrics_server,
                   ServeTrainingMetrics(f.training, &metrics));
  if (metrics_server != nullptr) f.o.metrics = &metrics;
  // Rank 0 exports from its final checkpoint, made in a temporary directory
  // when the job names none.
  ScratchDir scratch;
  if (!f.training.export_to.empty() && f.training.checkpoint_dir.empty()) {
    RETURN_IF_ERROR(scratch.Make());
    f.o.fallback_checkpoint_dir = scratch.path();
  }
  WorkerOutcome outcome;
  f.o.outcome = &outcome;
  f.o.stop_signal = InstallStopSignal();
  RETURN_IF_ERROR(RunWorker(f.o));
  if (outcome.rank != 0) return absl::OkStatus();
  return WriteRunOutputs(f.training, outcome.result, outcome.checkpoint_dir);
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
               "calls without it (health checks excepted), clients send it",
               "FILE");
  flags.String("tls-cert", &o->tls_cert,
               "PEM certificate: a server's own (turns TLS on); a client "
               "presents it when a server asks (--tls-client-auth)",
               "FILE");
  flags.String("tls-key", &o->tls_key, "PEM private key of --tls-cert", "FILE");
  flags.String("tls-ca", &o->tls_ca,
               "PEM CA certificate: clients accept only servers it signed "
               "(turns TLS on); with --tls-client-auth, servers accept only "
               "clients it signed",
               "FILE");
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
               "the coordinator's HOST:PORT; required", "HOST:PORT");
  flags.String("listen", &o.listen,
               "HOST:PORT to serve workers on (default 0.0.0.0:0, any port)",
               "HOST:PORT");
  flags.String("host", &o.advertise_host,
               "address workers reach this shard on (default: the --listen "
               "host if it names one, else the local address of the route "
               "to the coordinator)",
               "ADDRESS");
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
