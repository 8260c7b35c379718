// `cohort coordinator` and `cohort worker`: the two daemons of a job.
#include "cli/cluster_commands.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "cli/flags.h"
#include "cli/train_command.h"
#include "common/status_macros.h"
#include "server/coordinator.h"
#include "worker/spec.h"
#include "worker/worker_process.h"

namespace cohort {

absl::Status RunCoordinator(const std::vector<std::string>& args, bool* help,
                            int* exit_code) {
  std::string job, listen = "0.0.0.0:29400", report;
  bool serve_after_done = false;
  FlagSet flags("coordinator");
  flags.String("job", &job, "job spec (.textproto); required");
  flags.String("listen", &listen,
               "HOST:PORT to serve on (default 0.0.0.0:29400)");
  flags.String("report", &report,
               "write the job's JSON report here at the end");
  flags.Bool("serve-after-done", &serve_after_done,
             "keep answering status and metrics after the job ends, until "
             "cohort stop");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (job.empty()) return absl::InvalidArgumentError("--job=FILE is required");
  CoordinatorOptions o;
  ASSIGN_OR_RETURN(o.job, LoadJobSpec(job));
  o.listen = listen;
  o.report_path = report;
  o.serve_after_done = serve_after_done;
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> c,
                   CoordinatorServer::Start(o));
  std::fprintf(stderr, "cohort coordinator: job \"%s\" serving on %s\n",
               o.job.name().c_str(), c->address().c_str());
  const JobState state = c->Wait();
  const StatusResponse s = c->Status();
  c->Shutdown();
  std::fprintf(
      stderr, "cohort coordinator: job %s%s\n", JobState_Name(state).c_str(),
      s.reason().empty() ? "" : absl::StrCat(": ", s.reason()).c_str());
  *exit_code = state == SUCCEEDED ? 0 : 1;
  return absl::OkStatus();
}

absl::Status RunWorkerCommand(const std::vector<std::string>& args,
                              bool* help) {
  WorkerOptions o;
  std::string replicas = "cpu:1";
  int64_t threads = 0, connect_timeout_s = 60;
  FlagSet flags("worker");
  flags.String("coordinator", &o.coordinator,
               "the coordinator's HOST:PORT; required");
  flags.String("replicas", &replicas, "local replicas, cpu:N (default cpu:1)");
  flags.Int("threads", &threads,
            "compute threads in all (default: one per replica)", 1, 1024);
  flags.String("data-dir", &o.data_dir,
               "data set directory (overrides the spec)");
  flags.String("host", &o.host,
               "address peers reach this worker on (default: 127.0.0.1 for a "
               "loopback coordinator, else the host name)");
  flags.Int("connect-timeout", &connect_timeout_s,
            "seconds to keep trying to reach the coordinator (default 60)", 1,
            86400);
  flags.Bool("quiet", &o.quiet, "no progress output");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (o.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator=HOST:PORT is required");
  }
  ASSIGN_OR_RETURN(o.replicas, ParseReplicas(replicas));
  o.threads = static_cast<int>(threads);
  o.connect_timeout = absl::Seconds(connect_timeout_s);
  o.live_progress = isatty(STDERR_FILENO);
  return RunWorker(o);
}

}  // namespace cohort
