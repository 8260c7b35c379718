// The cohort command line: one binary, one subcommand per role.
//
// Exit status: 0 on success, 2 when the user's input was wrong (flags, job
// spec, data files), 1 for anything else. Errors are one line on stderr.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cli/checkpoint_command.h"
#include "cli/cluster_commands.h"
#include "cli/flags.h"
#include "cli/import_command.h"
#include "cli/launch_command.h"
#include "cli/layers_command.h"
#include "cli/model_commands.h"
#include "cli/train_command.h"
#include "cli/version.h"
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
    "  layers       the layer kinds of a model, or one kind's fields\n"
    "  import       a torch.onnx.export model as a job spec and weights\n"
    "               (--onnx=FILE --out=JOB [--weights=FILE])\n"
    "  version      cohort's version, build commit and GPU plugin\n"
    "  help         this text\n"
    "Run 'cohort COMMAND --help' for a command's flags.\n";

// Runs `command` with `args`; false for a command cohort does not have.
// *exit_code is the command's own exit status when it returns OK.
bool Dispatch(const std::string& command, const std::vector<std::string>& args,
              absl::Status* status, int* exit_code) {
  bool help = false;
  using Run = std::function<absl::Status()>;
  const std::vector<std::pair<const char*, Run>> commands = {
      {"train", [&] { return cohort::RunTrain(args, &help); }},
      {"local",
       [&] {
         return cohort::RunLocal(args, &help, exit_code, "/proc/self/exe");
       }},
      {"coordinator",
       [&] { return cohort::RunCoordinator(args, &help, exit_code); }},
      {"worker", [&] { return cohort::RunWorkerCommand(args, &help); }},
      {"launch", [&] { return cohort::RunLaunch(args, &help, exit_code); }},
      {"ps", [&] { return cohort::RunPsCommand(args, &help); }},
      {"status", [&] { return cohort::RunStatus(args, &help); }},
      {"metrics", [&] { return cohort::RunMetrics(args, &help); }},
      {"stop", [&] { return cohort::RunStop(args, &help); }},
      {"checkpoint", [&] { return cohort::RunCheckpoint(args, &help); }},
      {"export", [&] { return cohort::RunExport(args, &help); }},
      {"predict", [&] { return cohort::RunPredict(args, &help); }},
      {"evaluate", [&] { return cohort::RunEvaluate(args, &help); }},
      {"layers", [&] { return cohort::RunLayers(args, &help); }},
      {"import", [&] { return cohort::RunImport(args, &help); }},
  };
  for (const auto& [name, run] : commands) {
    if (command != name) continue;
    // Every command answers --version the same way, whatever else it got.
    if (std::find(args.begin(), args.end(), "--version") != args.end()) {
      std::fputs(cohort::VersionText().c_str(), stdout);
      return true;
    }
    *status = run();
    return true;
  }
  return false;
}

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
  if (command == "version" || command == "--version") {
    std::fputs(cohort::VersionText().c_str(), stdout);
    return 0;
  }
  absl::Status status;
  int exit_code = 0;
  if (!Dispatch(command, args, &status, &exit_code)) {
    std::fprintf(
        stderr,
        "cohort: unknown command \"%s\" (commands: train, local, "
        "coordinator, worker, launch, ps, status, metrics, stop, "
        "checkpoint, export, predict, evaluate, layers, import, version, "
        "help)\n",
        command.c_str());
    return 2;
  }
  if (status.ok()) return exit_code;
  std::fprintf(stderr, "cohort %s: %s\n", command.c_str(),
               std::string(status.message()).c_str());
  return cohort::IsUserError(status) ? 2 : 1;
}
