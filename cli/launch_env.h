// The launch environment a scheduler hands each task of a job, read into the
// settings cohort's coordinator and workers need:
//   SLURM (a job step started by srun): SLURM_PROCID, SLURM_NTASKS, the
//     step's (else the job's) node list, SLURM_JOB_ID, SLURM_LOCALID;
//   torchrun-style (torchrun, Kubeflow's PyTorchJob, Volcano's pytorch
//     plugin): MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, and LOCAL_RANK /
//     LOCAL_WORLD_SIZE where set.
// Launch rank 0 runs the coordinator (on the first node of the step, or at
// MASTER_ADDR) and every rank runs a worker that joins it. When both are set
// (torchrun started by srun), the torchrun variables win: they describe this
// process, the SLURM ones the torchrun that started it.
//
// The environment is passed in as a map (tests need no real environment);
// only the two hooks at the end read the process's own. Every malformed
// variable is an INVALID_ARGUMENT naming the variable and its value.
//
// Thread safety: stateless functions and plain values.
#ifndef COHORT_CLI_LAUNCH_ENV_H_
#define COHORT_CLI_LAUNCH_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

using EnvMap = std::map<std::string, std::string>;

// This process's environment (environ), as an EnvMap.
EnvMap ProcessEnvironment();

// The coordinator's port when neither a flag, COHORT_COORDINATOR_PORT nor
// MASTER_PORT says otherwise: `cohort coordinator`'s own default.
inline constexpr int kDefaultCoordinatorPort = 29400;

enum class LaunchSource { kNone, kSlurm, kTorchrun };

struct LaunchEnv {
  LaunchSource source = LaunchSource::kNone;
  int rank = 0;              // this task's rank among the launched tasks
  int world_size = 1;        // the launched tasks, one cohort worker each
  int local_rank = 0;        // this task's rank on its node
  int local_world_size = 0;  // tasks on this node; 0: not known
  // Where the coordinator runs (the first node of the step, or
  // MASTER_ADDR; never bracketed) and its port.
  std::string coordinator_host;
  int coordinator_port = kDefaultCoordinatorPort;
  // Which setting chose the port, for messages: "--coordinator-port",
  // "COHORT_COORDINATOR_PORT", "MASTER_PORT" or "the default".
  std::string port_from = "the default";
  std::vector<std::string> nodes;  // SLURM: the step's nodes, in order
  std::string job_id;              // SLURM_JOB_ID; empty for torchrun
  // SLURM: read in a batch script (SLURM_PROCID set, no SLURM_STEP_ID),
  // where SLURM_NTASKS counts the job's tasks, not processes started.
  bool slurm_batch_script = false;

  // Launch rank 0 runs the coordinator as well as a worker.
  bool runs_coordinator() const { return rank == 0; }
  // HOST:PORT, an IPv6 host in brackets.
  std::string CoordinatorAddress() const;
  // One line saying which environment was used and what it decided, e.g.
  // "SLURM job 42 step task 1 of 3 on node[01-03]: coordinator at
  // node01:29400 (the default port)".
  std::string Describe() const;
};

// Reads the launch environment from `env`. `port_flag` > 0 is the
// --coordinator-port flag, which wins over COHORT_COORDINATOR_PORT, which
// wins over MASTER_PORT. Neither environment present: source kNone (not an
// error).
absl::StatusOr<LaunchEnv> ReadLaunchEnv(const EnvMap& env, int port_flag = 0);

// Refuses, naming srun, a SLURM batch script of several tasks: `cohort
// launch` there would be one process where the job asked for several.
absl::Status CheckOneProcessPerTask(const LaunchEnv& env);

// The hooks of `cohort worker` and `cohort coordinator`, the only functions
// here that read this process's environment. Each prints one line to stderr
// naming the environment it used, and none when there is none.
// CoordinatorFromEnvironment: the coordinator's HOST:PORT, or "" outside a
// launch environment. ListenFromEnvironment: "0.0.0.0:PORT" ("[::]:PORT"
// for an IPv6 coordinator) with the environment's port, else `fallback`.
absl::StatusOr<std::string> CoordinatorFromEnvironment(
    const std::string& command);
absl::StatusOr<std::string> ListenFromEnvironment(const std::string& command,
                                                  const std::string& fallback);

// Expands a SLURM host list, e.g. "node[01-03,7],gpu5" into node01, node02,
// node03, node7, gpu5 (zero padding kept; several bracket groups in one
// name multiply: "r[1-2]n[1-2]" is r1n1, r1n2, r2n1, r2n2). `variable` names
// where the list came from, for the message of a malformed one. At most
// 65536 names.
absl::StatusOr<std::vector<std::string>> ExpandHostList(
    absl::string_view list, absl::string_view variable);

// The name a job started under `env` gets: the spec's `spec_name`, unless
// the spec left it to the default "job" and SLURM gave a job id, in which
// case "slurm-JOBID" (so that reports and dashboards of several jobs differ
// and name the SLURM job they belong to).
std::string LaunchJobName(const LaunchEnv& env, const std::string& spec_name);

}  // namespace cohort

#endif  // COHORT_CLI_LAUNCH_ENV_H_
