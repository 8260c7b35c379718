// The cohort command line: one binary, one subcommand per role.
//
// Exit status: 0 on success, 2 when the user's input was wrong (flags, job
// spec, data files), 1 for anything else. Errors are one line on stderr.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/train_command.h"

namespace {

constexpr char kUsage[] =
    "usage: cohort COMMAND [flags]\n"
    "commands:\n"
    "  train     train a job in this process (--job=FILE ...)\n"
    "  help      this text\n"
    "Run 'cohort COMMAND --help' for a command's flags.\n";

bool IsUserError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
      return true;
    default:
      return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
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
  if (command == "train") {
    status = cohort::RunTrain(args, &help);
  } else {
    std::fprintf(stderr,
                 "cohort: unknown command \"%s\" (commands: train, help)\n",
                 command.c_str());
    return 2;
  }
  if (status.ok()) return 0;
  std::fprintf(stderr, "cohort %s: %s\n", command.c_str(),
               std::string(status.message()).c_str());
  return IsUserError(status) ? 2 : 1;
}
