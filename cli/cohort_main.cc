// The cohort command line: one binary, one subcommand per role.
//
// Exit status: 0 on success, 2 when the user's input was wrong (flags, job
// spec, data files), 1 for anything else. Errors are one line on stderr.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/checkpoint_command.h"
#include "cli/cluster_commands.h"
#include "cli/flags.h"
#include "cli/launch_command.h"
#include "cli/model_commands.h"
#include "cli/train_command.h"
#include "common/malloc_tuning.h"

namespace {

constexpr char kUsage[] =
    "usage: cohort COMMAND [flags]\n"
    "commands:\n"
    "  train        train a job in this process (--job=FILE ...)\n"
    "  local        a coordinator and N workers on this machine\n"
    "  coordinator  serve a job: rendezvous, health, status (--job, --listen)\n"
    "  worker       join a coordinator and train (--coordinator=HOST:PORT)\n"
    "  launch       every task of a SLURM step or torchrun-style job: rank 0\n"
    "               runs the coordinator too (--job=FILE)\n"
    "  ps           serve a parameter-server shard (--coordinator=HOST:PORT)\n"
    "  status       a running job's state and workers\n"
    "  metrics      per-worker step-time breakdown and throughput\n"
    "  stop         stop a running job\n"
    "  checkpoint   verify a checkpoint directory (verify DIR) or show a file\n"
    "  export       a checkpoint's model as ONNX or safetensors\n"
    "  predict      a checkpoint's model's outputs (a .npy, or a data split)\n"
    "  evaluate     a checkpoint's model's metrics on a data split\n"
    "  help         this text\n"
    "Run 'cohort COMMAND --help' for a command's flags.\n";

constexpr char kCommands[] =
    "train, local, coordinator, worker, launch, ps, status, metrics, stop, "
    "checkpoint, "
    "export, predict, evaluate, help";

}  // namespace

int main(int argc, char** argv) {
  cohort::KeepLargeBuffersResident();
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::Status status;
  bool help = false;
  int exit_code = 0;
  if (command == "train") {
    status = cohort::RunTrain(args, &help);
  } else if (command == "local") {
    status = cohort::RunLocal(args, &help, &exit_code, "/proc/self/exe");
  } else if (command == "coordinator") {
    status = cohort::RunCoordinator(args, &help, &exit_code);
  } else if (command == "worker") {
    status = cohort::RunWorkerCommand(args, &help);
  } else if (command == "launch") {
    status = cohort::RunLaunch(args, &help, &exit_code);
  } else if (command == "ps") {
    status = cohort::RunPsCommand(args, &help);
  } else if (command == "status") {
    status = cohort::RunStatus(args, &help);
  } else if (command == "metrics") {
    status = cohort::RunMetrics(args, &help);
  } else if (command == "stop") {
    status = cohort::RunStop(args, &help);
  } else if (command == "checkpoint") {
    status = cohort::RunCheckpoint(args, &help);
  } else if (command == "export") {
    status = cohort::RunExport(args, &help);
  } else if (command == "predict") {
    status = cohort::RunPredict(args, &help);
  } else if (command == "evaluate") {
    status = cohort::RunEvaluate(args, &help);
  } else {
    std::fprintf(stderr, "cohort: unknown command \"%s\" (commands: %s)\n",
                 command.c_str(), kCommands);
    return 2;
  }
  if (status.ok()) return exit_code;
  std::fprintf(stderr, "cohort %s: %s\n", command.c_str(),
               std::string(status.message()).c_str());
  return cohort::IsUserError(status) ? 2 : 1;
}
