// `cohort launch`: a coordinator and a worker on launch rank 0, a worker on
// every other rank, all from one command line and the scheduler's
// environment (cli/launch_env.h).
//
// The coordinator runs in rank 0's own process, not a child: one process
// per task is what SLURM and Kubernetes count, signal and clean up, so a
// SIGTERM (scancel, a pod's deletion) reaches the coordinator and the
// worker together, and nothing is left behind when the task ends. On that
// signal every task's worker stops after its step in flight (cohort rank 0
// writing the final checkpoint); rank 0 then waits until the other workers
// have gone silent, ends the job as STOPPED and writes the report.
#include "cli/launch_command.h"

#include <atomic>
#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/cluster_commands.h"
#include "cli/devices.h"
#include "cli/flags.h"
#include "cli/launch_env.h"
#include "cli/output_paths.h"
#include "cli/stop_signal.h"
#include "cli/training_flags.h"
#include "cli/worker_count_flags.h"
#include "client/coordinator_client.h"
#include "common/spec.h"
#include "common/spec_workers.h"
#include "common/status_macros.h"
#include "server/coordinator.h"

namespace cohort {
namespace {

// How long rank 0 waits, after a termination signal, for the other workers
// to stop (each stops within a step plus 1.5 s, then writes its final
// checkpoint); SLURM's KillWait and a pod's grace period (30 s by default)
// must be longer.
constexpr absl::Duration kStopWait = absl::Seconds(10);

struct LaunchFlags {
  std::string job, state_dir, metrics_listen;
  int64_t port = 0;
  WorkerCountFlags counts;
  // Launch keeps --report (the coordinator's, on rank 0); the rest go to
  // this task's worker, which parses them.
  TrainingFlags training;
  SecurityOptions security;
};

void AddLaunchFlags(FlagSet& flags, LaunchFlags* f) {
  flags.String("job", &f->job,
               "job spec (.textproto); required (read by launch rank 0, "
               "which runs the coordinator)",
               "FILE");
  flags.Int("coordinator-port", &f->port,
            "the coordinator's port (default: COHORT_COORDINATOR_PORT, else "
            "MASTER_PORT, else 29400)",
            1, 65535);
  AddWorkerCountFlags(flags, &f->counts,
                      "the launched tasks, WORLD_SIZE or SLURM_NTASKS; the "
                      "job may start before all have joined, or take more, "
                      "not fewer");
  flags.String("state-dir", &f->state_dir,
               "launch rank 0 keeps the coordinator's state here (cohort "
               "coordinator --state-dir)",
               "DIR");
  flags.String("coordinator-metrics-listen", &f->metrics_listen,
               "HOST:PORT of launch rank 0's coordinator dashboard and "
               "Prometheus metrics (cohort coordinator --metrics-listen)",
               "HOST:PORT");
  f->training.Register(flags, TrainingCommand::kLaunch);
  AddSecurityFlags(flags, &f->security);
}

// Flags with a value that launch keeps; the security flags also go to the
// worker (re-emitted from the parsed options). Everything else, the
// training flags but --report among it, is the worker's, passed on
// unchanged.
bool IsLaunchFlag(const std::string& name, bool* takes_value) {
  for (const char* f :
       {"job", "coordinator-port", "report", "state-dir",
        "coordinator-metrics-listen", "workers", "min-workers", "max-workers",
        "token-file", "tls-cert", "tls-key", "tls-ca"}) {
    if (name == f) {
      *takes_value = true;
      return true;
    }
  }
  *takes_value = false;
  return name == "help" || name == "tls-client-auth" ||
         name == "notls-client-auth";
}

void SplitArgs(const std::vector<std::string>& args,
               std::vector<std::string>* own,
               std::vector<std::string>* worker) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t eq = a.find('=');
    const std::string name =
        absl::StartsWith(a, "--")
            ? a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)
            : "";
    bool takes_value = false;
    if (!IsLaunchFlag(name, &takes_value)) {
      worker->push_back(a);
      continue;
    }
    own->push_back(a);
    if (takes_value && eq == std::string::npos && i + 1 < args.size()) {
      own->push_back(args[++i]);
    }
  }
}

// The worker's command line: the caller's worker flags, the coordinator,
// the security flags and, for one of several ranks on a GPU machine that
// gave no --devices, the GPU of its LOCAL_RANK.
absl::StatusOr<std::vector<std::string>> WorkerArgs(
    std::vector<std::string> args, const LaunchEnv& env, const LaunchFlags& f) {
  bool devices = false;
  for (const std::string& a : args) {
    if (absl::StartsWith(a, "--coordinator")) {
      return absl::InvalidArgumentError(
          "cohort launch takes the coordinator's address from the launch "
          "environment: move its port with --coordinator-port, or run "
          "cohort worker --coordinator=HOST:PORT instead");
    }
    devices = devices || absl::StartsWith(a, "--devices") ||
              absl::StartsWith(a, "--replicas");
  }
  if (!devices && env.local_world_size > 1) {
    ASSIGN_OR_RETURN(const Devices d, ResolveDevices("", ""));
    if (!d.gpus.empty()) {
      if (env.local_rank >= static_cast<int>(d.gpus.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "LOCAL_RANK=", env.local_rank, " of LOCAL_WORLD_SIZE=",
            env.local_world_size, " has no GPU of its own: this machine has ",
            d.gpus.size(), "; start one rank per GPU, or one per machine"));
      }
      args.push_back(absl::StrCat("--devices=gpu:", d.gpus[env.local_rank]));
    }
  }
  args.push_back(absl::StrCat("--coordinator=", env.CoordinatorAddress()));
  for (std::string& s : SecurityArgs(f.security)) args.push_back(std::move(s));
  return args;
}

// The flags may let a launched job start before all its tasks have joined
// (--min-workers) or take more later (--max-workers), but a minimum above
// the tasks never forms and a maximum below them refuses some. Checked on
// every rank, so that each task says it rather than wait for rank 0.
absl::Status CheckLaunchWorkerCounts(const WorkerCountFlags& counts,
                                     const LaunchEnv& env) {
  const std::string tasks = absl::StrCat(
      "the ", env.world_size, " launched tasks (",
      env.source == LaunchSource::kSlurm ? "SLURM_NTASKS" : "WORLD_SIZE", ")");
  if (counts.workers > 0 && counts.workers != env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers=", counts.workers, " is not ", tasks,
                     ": the job would never start, or refuse some of them"));
  }
  if (counts.min_workers > env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-workers=", counts.min_workers, " is more than ",
                     tasks, ": the job would never start"));
  }
  if (counts.max_workers > 0 && counts.max_workers < env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-workers=", counts.max_workers, " is less than ",
                     tasks, ": the coordinator would refuse the others"));
  }
  return absl::OkStatus();
}

// The launched tasks are the world: the job forms once every one of them
// has joined, whatever the spec's cluster section says, unless the flags
// say otherwise (CheckLaunchWorkerCounts).
absl::Status LaunchWorkerCounts(const WorkerCountFlags& counts,
                                const LaunchEnv& env, ClusterSpec* cluster) {
  cluster->set_min_workers(env.world_size);
  cluster->set_max_workers(env.world_size);
  return ApplyWorkerCounts(counts, cluster);
}

absl::StatusOr<CoordinatorOptions> CoordinatorOptionsFor(const LaunchFlags& f,
                                                         const LaunchEnv& env) {
  CoordinatorOptions o;
  ASSIGN_OR_RETURN(o.job, LoadJobSpec(f.job));
  if (!f.training.report.empty()) {
    CommandInputs inputs;
    inputs.files.emplace_back("the --job file", f.job);
    RETURN_IF_ERROR(CheckOutputFlag("--report", f.training.report, inputs));
  }
  o.job.set_name(LaunchJobName(env, o.job.name()));
  RETURN_IF_ERROR(LaunchWorkerCounts(f.counts, env, o.job.mutable_cluster()));
  const bool v6 = absl::StrContains(env.coordinator_host, ':');
  o.listen = absl::StrCat(v6 ? "[::]" : "0.0.0.0", ":", env.coordinator_port);
  o.report_path = f.training.report;
  o.state_dir = f.state_dir;
  o.security = f.security;
  o.metrics_listen = f.metrics_listen;
  return o;
}

bool Ended(JobState s) { return s == SUCCEEDED || s == FAILED || s == STOPPED; }

// After a termination signal: waits until every worker still listed has
// been silent for two heartbeat intervals (stopped), or kStopWait.
void WaitForWorkersToStop(const CoordinatorServer& c, const JobSpec& job) {
  const double silent_s = 2e-3 * job.cluster().heartbeat_interval_ms() + 0.5;
  const absl::Time until = absl::Now() + kStopWait;
  while (absl::Now() < until) {
    const StatusResponse s = c.Status();
    if (Ended(s.state())) return;
    bool all = true;
    for (const WorkerStatus& w : s.workers()) {
      if (!w.finished() && w.heartbeat_age_s() < silent_s) all = false;
    }
    if (all) return;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// Ends the job as STOPPED for `reason` (through the Stop RPC, which records
// it); Shutdown where that call fails (a certificate that does not name
// 127.0.0.1), which stops it as "the coordinator shut down".
void StopJob(CoordinatorServer& c, const SecurityOptions& security,
             const std::string& reason) {
  auto client =
      CoordinatorClient::Create(absl::StrCat("127.0.0.1:", c.port()), security);
  if (client.ok() && (*client)->Stop(reason, absl::Seconds(5)).ok()) return;
  c.Shutdown();
}

// Launch rank 0: the coordinator here, then this task's worker, then the
// job's end.
absl::Status RunCoordinatorAndWorker(const LaunchFlags& f, const LaunchEnv& env,
                                     const std::vector<std::string>& worker,
                                     int* exit_code) {
  const std::atomic<bool>* stop = InstallStopSignal();
  ASSIGN_OR_RETURN(const CoordinatorOptions o, CoordinatorOptionsFor(f, env));
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> c,
                   CoordinatorServer::Start(o));
  std::fprintf(stderr,
               "cohort launch: coordinator of job \"%s\" serving on %s, "
               "waiting for %s%s\n",
               o.job.name().c_str(), c->address().c_str(),
               DescribeWorkerCounts(o.job.cluster()).c_str(),
               o.job.mode() == PS ? " and the spec's cohort ps shards" : "");
  bool help = false;
  const absl::Status w = RunWorkerCommand(worker, &help);
  if (!w.ok()) {
    std::fprintf(stderr, "cohort launch: this task's worker: %s\n",
                 std::string(w.message()).c_str());
  }
  if (stop->load()) {
    WaitForWorkersToStop(*c, o.job);
    StopJob(*c, o.security, "stopped by a termination signal");
  } else if (!w.ok() && IsUserError(w)) {
    // The same mistake (a flag, the data) fails the other tasks too:
    // end the job now rather than after its join timeout.
    StopJob(*c, o.security,
            absl::StrCat("launch rank 0's worker: ", w.message()));
  }
  // Otherwise the job goes on, elastically, without this task's worker.
  const JobState state = c->Wait();
  const StatusResponse s = c->Status();
  c->Shutdown();
  std::fprintf(
      stderr, "cohort launch: job %s%s\n", JobState_Name(state).c_str(),
      s.reason().empty() ? "" : absl::StrCat(": ", s.reason()).c_str());
  *exit_code = state == SUCCEEDED ? 0 : 1;
  if (!w.ok() && IsUserError(w)) return w;
  return c->report_status();
}

}  // namespace

absl::Status RunLaunch(const std::vector<std::string>& args, bool* help,
                       int* exit_code) {
  LaunchFlags f;
  FlagSet flags("launch");
  AddLaunchFlags(flags, &f);
  std::vector<std::string> own, worker;
  SplitArgs(args, &own, &worker);
  RETURN_IF_ERROR(flags.Parse(own));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    std::fputs(
        "The training flags but --report, and every other flag, are cohort "
        "worker's (see cohort worker --help), given to this task's worker.\n",
        stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (f.job.empty())
    return absl::InvalidArgumentError("--job=FILE is required");
  ASSIGN_OR_RETURN(
      const LaunchEnv env,
      ReadLaunchEnv(ProcessEnvironment(), static_cast<int>(f.port)));
  if (env.source == LaunchSource::kNone) {
    return absl::FailedPreconditionError(
        "cohort launch needs a SLURM job step (srun sets SLURM_PROCID, "
        "SLURM_NTASKS, SLURM_JOB_NODELIST) or a torchrun-style environment "
        "(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE); elsewhere start "
        "cohort coordinator and cohort worker");
  }
  RETURN_IF_ERROR(CheckOneProcessPerTask(env));
  RETURN_IF_ERROR(CheckLaunchWorkerCounts(f.counts, env));
  ASSIGN_OR_RETURN(const std::vector<std::string> w,
                   WorkerArgs(std::move(worker), env, f));
  std::fprintf(stderr, "cohort launch: %s\n", env.Describe().c_str());
  if (!env.runs_coordinator()) return RunWorkerCommand(w, help);
  return RunCoordinatorAndWorker(f, env, w, exit_code);
}

}  // namespace cohort
