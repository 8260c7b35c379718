// Command-line flags of one cohort subcommand.
//
// cohort parses its own flags (rather than with absl/flags) so that every
// mistake -- an unknown flag, a missing or malformed value, a stray
// argument -- comes back as one absl::Status sentence naming the flag, and
// the CLI can exit with status 2, the convention for bad usage.
//
// Thread safety: none; used once, on the main thread.
#ifndef COHORT_CLI_FLAGS_H_
#define COHORT_CLI_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

class FlagSet {
 public:
  explicit FlagSet(std::string command) : command_(std::move(command)) {}

  // Registers a flag; `target` keeps its value unless the flag is given.
  // `type` names what the value is in Usage (FILE, DIR, HOST:PORT...).
  // Usage shows the default: the help's own "(default ...)", else the
  // target's value when registered ("none" for an empty string).
  void String(const std::string& name, std::string* target,
              const std::string& help, const std::string& type = "TEXT");
  // Accepts integers in [min, max].
  void Int(const std::string& name, int64_t* target, const std::string& help,
           int64_t min = 0, int64_t max = INT64_MAX);
  void Bool(const std::string& name, bool* target, const std::string& help);

  // Parses `args` (the words after the subcommand). Forms: --name=value,
  // --name value, --bool, --nobool. "--help" sets help_requested(). An
  // unknown flag's error names the nearest known one.
  absl::Status Parse(const std::vector<std::string>& args);

  bool help_requested() const { return help_; }
  // One line per flag: "--name=TYPE  help (default: ...)", then --help and
  // --version (which cohort_main answers for every command).
  std::string Usage() const;

 private:
  enum class Kind { kString, kInt, kBool };
  struct Flag {
    std::string name;
    Kind kind;
    void* target;
    std::string help;
    int64_t min = 0, max = 0;
    std::string type;           // shown after "=" (none for a bool)
    std::string default_value;  // the target's value when registered
  };
  const Flag* Find(const std::string& name) const;
  absl::Status Unknown(const std::string& name) const;
  absl::Status Set(const Flag& flag, const std::string& value);

  std::string command_;
  std::vector<Flag> flags_;
  bool help_ = false;
};

// Whether `s` is the user's mistake (a bad flag, spec, file or refused
// input), for which cohort exits with status 2 rather than 1.
bool IsUserError(const absl::Status& s);

}  // namespace cohort

#endif  // COHORT_CLI_FLAGS_H_
