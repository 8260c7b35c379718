#include "cli/launch_env.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

extern char** environ;

namespace cohort {
namespace {

constexpr size_t kMaxHosts = 65536;
constexpr int kMaxWorld = 1 << 20;

absl::Status BadVariable(absl::string_view name, absl::string_view value,
                         absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, "=\"", value, "\": ", why));
}

const std::string* Find(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// A plain decimal number in [min, max]: digits only (no sign, no spaces),
// because a launcher writes them so and anything else is a mistake.
absl::StatusOr<int> ParseNumber(const EnvMap& env, const std::string& name,
                                int min, int max) {
  const std::string* value = Find(env, name);
  if (value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set"));
  }
  int64_t n = 0;
  bool digits = !value->empty() && value->size() <= 10;
  for (char c : *value) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) digits = false;
    if (digits) n = n * 10 + (c - '0');
  }
  if (!digits || n < min || n > max) {
    return BadVariable(
        name, *value,
        absl::StrCat("want a whole number in [", min, ", ", max, "]"));
  }
  return static_cast<int>(n);
}

bool HostChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '.' || c == '_';
}

// The names one bracket group stands for: "01-03,7" -> 01 02 03 7.
absl::StatusOr<std::vector<std::string>> ExpandGroup(absl::string_view group,
                                                     absl::string_view list,
                                                     absl::string_view var) {
  std::vector<std::string> out;
  for (absl::string_view range : absl::StrSplit(group, ',')) {
    std::pair<absl::string_view, absl::string_view> ends =
        absl::StrSplit(range, absl::MaxSplits('-', 1));
    if (!absl::StrContains(range, '-')) ends.second = ends.first;
    auto number = [](absl::string_view s, int64_t* n) {
      if (s.empty() || s.size() > 9) return false;
      *n = 0;
      for (char c : s) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
        *n = *n * 10 + (c - '0');
      }
      return true;
    };
    int64_t lo = 0, hi = 0;
    if (!number(ends.first, &lo) || !number(ends.second, &hi) || lo > hi) {
      return BadVariable(
          var, list,
          absl::StrCat("\"[", group, "]\" holds \"", range,
                       "\", not a number or a range LOW-HIGH of numbers"));
    }
    if (static_cast<size_t>(hi - lo) >= kMaxHosts) {
      return BadVariable(var, list,
                         absl::StrCat("more than ", kMaxHosts, " hosts"));
    }
    const int width = static_cast<int>(ends.first.size());
    for (int64_t i = lo; i <= hi; ++i) {
      out.push_back(absl::StrFormat("%0*d", width, i));
    }
  }
  return out;
}

// One comma-free item of a host list, e.g. "rack[1-2]-n[01-03]".
absl::Status ExpandItem(absl::string_view item, absl::string_view list,
                        absl::string_view var, std::vector<std::string>* out) {
  if (item.empty()) {
    return BadVariable(var, list, "an empty host name (two commas in a row?)");
  }
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '[') {
      const size_t close = item.find(']', i);
      ASSIGN_OR_RETURN(
          std::vector<std::string> parts,
          ExpandGroup(item.substr(i + 1, close - i - 1), list, var));
      if (names.size() * parts.size() > kMaxHosts) {
        return BadVariable(var, list,
                           absl::StrCat("more than ", kMaxHosts, " hosts"));
      }
      std::vector<std::string> product;
      for (const std::string& n : names) {
        for (const std::string& p : parts) product.push_back(n + p);
      }
      names = std::move(product);
      i = close + 1;
      continue;
    }
    if (!HostChar(item[i])) {
      return BadVariable(var, list,
                         absl::StrCat("\"", item.substr(i, 1),
                                      "\" cannot be part of a host name"));
    }
    for (std::string& n : names) n.push_back(item[i]);
    ++i;
  }
  if (out->size() + names.size() > kMaxHosts) {
    return BadVariable(var, list,
                       absl::StrCat("more than ", kMaxHosts, " hosts"));
  }
  out->insert(out->end(), names.begin(), names.end());
  return absl::OkStatus();
}

// Splits at the commas outside brackets; checks that brackets pair up.
absl::StatusOr<std::vector<absl::string_view>> SplitItems(
    absl::string_view list, absl::string_view var) {
  std::vector<absl::string_view> items;
  size_t start = 0;
  bool open = false;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (open) return BadVariable(var, list, "a \"[\" inside \"[...]\"");
      open = true;
    } else if (c == ']') {
      if (!open) return BadVariable(var, list, "a \"]\" without its \"[\"");
      open = false;
    } else if (c == ',' && !open) {
      items.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (open) return BadVariable(var, list, "a \"[\" without its \"]\"");
  return items;
}

// Strips the brackets of "[fd00::1]"; refuses what cannot be a host.
absl::StatusOr<std::string> ParseMasterAddr(const EnvMap& env) {
  const std::string* value = Find(env, "MASTER_ADDR");
  if (value == nullptr) {
    return absl::InvalidArgumentError("MASTER_ADDR is not set");
  }
  std::string host = *value;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  bool ok = !host.empty() && std::all_of(host.begin(), host.end(), HostChar);
  if (absl::StrContains(host, ':')) {
    // Only an IPv6 address may hold colons ("host:port" is a mistake).
    in6_addr ignored;
    const std::string address = host.substr(0, host.find('%'));
    ok = inet_pton(AF_INET6, address.c_str(), &ignored) == 1;
  }
  if (!ok) {
    return BadVariable("MASTER_ADDR", *value,
                       "want a host name or an IP address (no port)");
  }
  return host;
}

// --coordinator-port, else COHORT_COORDINATOR_PORT, else `fallback_var`
// (MASTER_PORT for torchrun; none for SLURM), else the default.
absl::Status ChoosePort(const EnvMap& env, int port_flag,
                        const std::string& fallback_var, LaunchEnv* out) {
  if (port_flag > 0) {
    out->coordinator_port = port_flag;
    out->port_from = "--coordinator-port";
    return absl::OkStatus();
  }
  for (const std::string& var :
       {std::string("COHORT_COORDINATOR_PORT"), fallback_var}) {
    if (var.empty() || Find(env, var) == nullptr) continue;
    ASSIGN_OR_RETURN(out->coordinator_port, ParseNumber(env, var, 1, 65535));
    out->port_from = var;
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<LaunchEnv> ReadTorchrun(const EnvMap& env, int port_flag) {
  LaunchEnv out;
  out.source = LaunchSource::kTorchrun;
  ASSIGN_OR_RETURN(out.coordinator_host, ParseMasterAddr(env));
  ASSIGN_OR_RETURN(out.world_size,
                   ParseNumber(env, "WORLD_SIZE", 1, kMaxWorld));
  ASSIGN_OR_RETURN(out.rank, ParseNumber(env, "RANK", 0, out.world_size - 1));
  // MASTER_PORT is required even when a flag overrides it: an environment
  // without it is not what torchrun or an operator makes.
  RETURN_IF_ERROR(ParseNumber(env, "MASTER_PORT", 1, 65535).status());
  RETURN_IF_ERROR(ChoosePort(env, port_flag, "MASTER_PORT", &out));
  if (Find(env, "LOCAL_WORLD_SIZE") != nullptr) {
    ASSIGN_OR_RETURN(out.local_world_size,
                     ParseNumber(env, "LOCAL_WORLD_SIZE", 1, out.world_size));
  }
  if (Find(env, "LOCAL_RANK") != nullptr) {
    ASSIGN_OR_RETURN(out.local_rank, ParseNumber(env, "LOCAL_RANK", 0,
                                                 out.local_world_size > 0
                                                     ? out.local_world_size - 1
                                                     : out.world_size - 1));
  }
  return out;
}

absl::StatusOr<LaunchEnv> ReadSlurm(const EnvMap& env, int port_flag) {
  LaunchEnv out;
  out.source = LaunchSource::kSlurm;
  ASSIGN_OR_RETURN(out.world_size,
                   ParseNumber(env, "SLURM_NTASKS", 1, kMaxWorld));
  ASSIGN_OR_RETURN(out.rank,
                   ParseNumber(env, "SLURM_PROCID", 0, out.world_size - 1));
  out.slurm_batch_script = Find(env, "SLURM_STEP_ID") == nullptr;
  // The step's nodes: task 0 runs on the first of them.
  const std::string var = Find(env, "SLURM_STEP_NODELIST") != nullptr
                              ? "SLURM_STEP_NODELIST"
                              : "SLURM_JOB_NODELIST";
  const std::string* list = Find(env, var);
  if (list == nullptr) {
    return absl::InvalidArgumentError(
        "SLURM_JOB_NODELIST is not set (SLURM_PROCID is)");
  }
  ASSIGN_OR_RETURN(out.nodes, ExpandHostList(*list, var));
  out.coordinator_host = out.nodes.front();
  if (const std::string* id = Find(env, "SLURM_JOB_ID")) {
    ASSIGN_OR_RETURN(const int ignored,
                     ParseNumber(env, "SLURM_JOB_ID", 0, INT32_MAX));
    (void)ignored;
    out.job_id = *id;
  }
  if (Find(env, "SLURM_LOCALID") != nullptr) {
    ASSIGN_OR_RETURN(out.local_rank,
                     ParseNumber(env, "SLURM_LOCALID", 0, out.world_size - 1));
  }
  RETURN_IF_ERROR(ChoosePort(env, port_flag, "", &out));
  return out;
}

}  // namespace

EnvMap ProcessEnvironment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)),
                std::string(entry.substr(eq + 1)));
  }
  return env;
}

std::string LaunchEnv::CoordinatorAddress() const {
  const bool v6 = absl::StrContains(coordinator_host, ':');
  return absl::StrCat(v6 ? "[" : "", coordinator_host, v6 ? "]" : "", ":",
                      coordinator_port);
}

std::string LaunchEnv::Describe() const {
  std::string where;
  if (source == LaunchSource::kSlurm) {
    where = absl::StrCat("SLURM job ", job_id.empty() ? "?" : job_id, ": task ",
                         rank, " of ", world_size, " on ", nodes.size(),
                         nodes.size() == 1 ? " node" : " nodes");
  } else if (source == LaunchSource::kTorchrun) {
    where = absl::StrCat(
        "torchrun-style environment (MASTER_ADDR, RANK, "
        "WORLD_SIZE): rank ",
        rank, " of ", world_size);
  } else {
    return "no launch environment";
  }
  return absl::StrCat(where, "; coordinator at ", CoordinatorAddress(), " (",
                      port_from == "the default"
                          ? "the default port"
                          : absl::StrCat("port from ", port_from),
                      ")", runs_coordinator() ? ", run by this task" : "");
}

absl::StatusOr<LaunchEnv> ReadLaunchEnv(const EnvMap& env, int port_flag) {
  for (const char* var : {"MASTER_ADDR", "RANK", "WORLD_SIZE"}) {
    if (Find(env, var) != nullptr) return ReadTorchrun(env, port_flag);
  }
  if (Find(env, "SLURM_PROCID") != nullptr) return ReadSlurm(env, port_flag);
  return LaunchEnv();
}

absl::Status CheckOneProcessPerTask(const LaunchEnv& env) {
  if (env.slurm_batch_script && env.world_size > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this is the batch script of a SLURM job of ", env.world_size,
        " tasks (SLURM_NTASKS), not one of its tasks (no SLURM_STEP_ID): "
        "start cohort launch with srun, one task per node"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CoordinatorFromEnvironment(
    const std::string& command) {
  ASSIGN_OR_RETURN(const LaunchEnv env, ReadLaunchEnv(ProcessEnvironment()));
  if (env.source == LaunchSource::kNone) return std::string();
  std::fprintf(stderr, "cohort %s: no --coordinator; %s\n", command.c_str(),
               env.Describe().c_str());
  return env.CoordinatorAddress();
}

absl::StatusOr<std::string> ListenFromEnvironment(const std::string& command,
                                                  const std::string& fallback) {
  ASSIGN_OR_RETURN(const LaunchEnv env, ReadLaunchEnv(ProcessEnvironment()));
  if (env.source == LaunchSource::kNone) return fallback;
  const bool v6 = absl::StrContains(env.coordinator_host, ':');
  const std::string listen =
      absl::StrCat(v6 ? "[::]" : "0.0.0.0", ":", env.coordinator_port);
  std::fprintf(stderr, "cohort %s: no --listen, so %s; %s\n", command.c_str(),
               listen.c_str(), env.Describe().c_str());
  return listen;
}

absl::StatusOr<std::vector<std::string>> ExpandHostList(
    absl::string_view list, absl::string_view variable) {
  ASSIGN_OR_RETURN(const std::vector<absl::string_view> items,
                   SplitItems(list, variable));
  std::vector<std::string> out;
  for (absl::string_view item : items) {
    RETURN_IF_ERROR(ExpandItem(item, list, variable, &out));
  }
  return out;
}

std::string LaunchJobName(const LaunchEnv& env, const std::string& spec_name) {
  if (spec_name == "job" && !env.job_id.empty()) {
    return absl::StrCat("slurm-", env.job_id);
  }
  return spec_name;
}

}  // namespace cohort
