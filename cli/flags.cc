#include "cli/flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/nearest_name.h"

namespace cohort {

void FlagSet::String(const std::string& name, std::string* target,
                     const std::string& help, const std::string& type) {
  flags_.push_back({name, Kind::kString, target, help, 0, 0, type,
                    target->empty() ? "none" : *target});
}

void FlagSet::Int(const std::string& name, int64_t* target,
                  const std::string& help, int64_t min, int64_t max) {
  flags_.push_back(
      {name, Kind::kInt, target, help, min, max, "INT", absl::StrCat(*target)});
}

void FlagSet::Bool(const std::string& name, bool* target,
                   const std::string& help) {
  flags_.push_back(
      {name, Kind::kBool, target, help, 0, 0, "", *target ? "true" : "false"});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Set(const Flag& flag, const std::string& value) {
  switch (flag.kind) {
    case Kind::kString:
      if (value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, " needs a value"));
      }
      *static_cast<std::string*>(flag.target) = value;
      return absl::OkStatus();
    case Kind::kInt: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v) || v < flag.min || v > flag.max) {
        std::string range =
            flag.max == INT64_MAX
                ? absl::StrCat(">= ", flag.min)
                : absl::StrCat("in [", flag.min, ", ", flag.max, "]");
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, " must be an integer ", range,
                         ", got \"", value, "\""));
      }
      *static_cast<int64_t*>(flag.target) = v;
      return absl::OkStatus();
    }
    case Kind::kBool:
      if (value == "true" || value == "1" || value == "yes") {
        *static_cast<bool*>(flag.target) = true;
      } else if (value == "false" || value == "0" || value == "no") {
        *static_cast<bool*>(flag.target) = false;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag.name, " must be true or false, got \"", value, "\""));
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status FlagSet::Unknown(const std::string& name) const {
  std::vector<std::string> names;
  for (const Flag& f : flags_) names.push_back(f.name);
  const std::string nearest = NearestName(name, names);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown flag --", name, " for \"cohort ", command_, "\"",
      nearest.empty() ? "" : absl::StrCat(": did you mean --", nearest, "?"),
      " (see cohort ", command_, " --help)"));
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument \"", arg, "\" (flags look like --name=value)"));
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      const Flag* negated = Find(name.substr(2));
      if (negated != nullptr && negated->kind == Kind::kBool) {
        *static_cast<bool*>(negated->target) = false;
        continue;
      }
    }
    if (flag == nullptr) return Unknown(name);
    if (!has_value) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
    }
    if (absl::Status s = Set(*flag, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// "  --name=TYPE   help", the help on the next line when the name is long.
void AppendLine(std::string* s, const std::string& flag,
                const std::string& help) {
  constexpr int kWidth = 30;
  if (static_cast<int>(flag.size()) <= kWidth) {
    absl::StrAppendFormat(s, "  %-*s %s\n", kWidth, flag, help);
  } else {
    absl::StrAppendFormat(s, "  %s\n  %-*s %s\n", flag, kWidth, "", help);
  }
}

}  // namespace

std::string FlagSet::Usage() const {
  std::string s = absl::StrCat("usage: cohort ", command_, " [flags]\n");
  for (const Flag& f : flags_) {
    std::string help = f.help;
    // A help that says its default, or that the flag is required, says
    // more than the registered value would.
    if (!absl::StrContains(help, "(default") &&
        !absl::StrContains(help, "required")) {
      absl::StrAppend(&help, " (default: ", f.default_value, ")");
    }
    AppendLine(&s,
               absl::StrCat("--", f.name, f.type.empty() ? "" : "=", f.type),
               help);
  }
  AppendLine(&s, "--help", "this text");
  AppendLine(&s, "--version",
             "cohort's version, the git commit it was built from, and "
             "whether the GPU plugin is installed");
  return s;
}

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

}  // namespace cohort
