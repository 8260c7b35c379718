#include "common/machine_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace cohort {
namespace {

// Kernel files are small; a missing or unreadable one reads as nullopt.
std::optional<std::string> Slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<int64_t> NumberFile(const std::string& path) {
  std::optional<std::string> text = Slurp(path);
  int64_t v;
  if (!text || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) {
    return std::nullopt;
  }
  return v;
}

// The value of "key:  N kB" (or "key N") in `text`, in bytes when `kb`.
std::optional<int64_t> Field(const std::string& text, absl::string_view key,
                             bool kb) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t:"), absl::SkipEmpty());
    int64_t v;
    if (words.size() >= 2 && words[0] == key &&
        absl::SimpleAtoi(words[1], &v)) {
      return kb ? v * 1024 : v;
    }
  }
  return std::nullopt;
}

// A cgroup's headroom: limit - (usage - inactive page cache), or nullopt
// when it has no limit (or none we can read).
struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* inactive;  // field of memory.stat
};
constexpr CgroupFiles kV2 = {"memory.max", "memory.current", "inactive_file"};
constexpr CgroupFiles kV1 = {"memory.limit_in_bytes", "memory.usage_in_bytes",
                             "total_inactive_file"};

std::optional<AvailableMemory> CgroupHeadroom(const std::string& dir,
                                              const CgroupFiles& f) {
  // v1 says "no limit" with a huge number, v2 with "max" (not a number).
  const std::optional<int64_t> limit = NumberFile(dir + "/" + f.limit);
  if (!limit || *limit >= (int64_t{1} << 60)) return std::nullopt;
  const int64_t usage = NumberFile(dir + "/" + f.usage).value_or(0);
  const std::optional<std::string> stat = Slurp(dir + "/memory.stat");
  const int64_t inactive =
      stat ? Field(*stat, f.inactive, false).value_or(0) : 0;
  const int64_t used = std::max<int64_t>(0, usage - inactive);
  return AvailableMemory{
      std::max<int64_t>(0, *limit - used),
      absl::StrCat("the cgroup memory limit of ", BytesString(*limit), ", ",
                   BytesString(used), " in use")};
}

// The tightest limit of the cgroup at `path` under `root` and the groups
// above it. Inside a cgroup namespace the path may not exist under our
// mount; the root of the mount is the group then.
std::optional<AvailableMemory> CgroupLimit(const std::string& root,
                                           std::string path,
                                           const CgroupFiles& f) {
  std::optional<AvailableMemory> best;
  while (true) {
    std::optional<AvailableMemory> here = CgroupHeadroom(root + path, f);
    if (here && (!best || here->bytes < best->bytes)) best = here;
    if (path.empty() || path == "/") break;
    path = path.substr(0, path.rfind('/'));
  }
  return best;
}

// The cgroup limits /proc/self/cgroup leads to: the v2 group ("0::PATH")
// under the root (or its "unified" mount in hybrid setups) and the v1
// memory controller's group ("N:...memory...:PATH") under root/memory.
std::optional<AvailableMemory> CgroupLimits(const MemoryProbe& probe) {
  std::optional<std::string> self = Slurp(probe.proc_root + "/self/cgroup");
  if (!self) return std::nullopt;
  std::optional<AvailableMemory> best;
  auto consider = [&](std::optional<AvailableMemory> m) {
    if (m && (!best || m->bytes < best->bytes)) best = m;
  };
  for (absl::string_view line : absl::StrSplit(*self, '\n')) {
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    const std::string& path = parts[2] == "/" ? "" : parts[2];
    if (parts[0] == "0" && parts[1].empty()) {
      consider(CgroupLimit(probe.cgroup_root, path, kV2));
      consider(CgroupLimit(probe.cgroup_root + "/unified", path, kV2));
    }
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == "memory") {
        consider(CgroupLimit(probe.cgroup_root + "/memory", path, kV1));
      }
    }
  }
  return best;
}

std::optional<AvailableMemory> AddressSpaceLimit(const MemoryProbe& probe) {
  struct rlimit rl;
  if (!probe.address_space_limit || getrlimit(RLIMIT_AS, &rl) != 0 ||
      rl.rlim_cur == RLIM_INFINITY) {
    return std::nullopt;
  }
  const int64_t limit = static_cast<int64_t>(
      std::min<rlim_t>(rl.rlim_cur, std::numeric_limits<int64_t>::max()));
  std::optional<std::string> status = Slurp(probe.proc_root + "/self/status");
  const int64_t mapped =
      status ? Field(*status, "VmSize", true).value_or(0) : 0;
  return AvailableMemory{std::max<int64_t>(0, limit - mapped),
                         absl::StrCat("ulimit -v of ", BytesString(limit), ", ",
                                      BytesString(mapped), " mapped")};
}

}  // namespace

absl::StatusOr<AvailableMemory> DetectAvailableMemory(
    const MemoryProbe& probe) {
  const std::string meminfo_path = probe.proc_root + "/meminfo";
  std::optional<std::string> meminfo = Slurp(meminfo_path);
  std::optional<int64_t> available =
      meminfo ? Field(*meminfo, "MemAvailable", true) : std::nullopt;
  if (!available) {
    return absl::NotFoundError(
        absl::StrCat("cannot read MemAvailable from ", meminfo_path));
  }
  AvailableMemory best{*available, "MemAvailable"};
  for (const std::optional<AvailableMemory>& m :
       {CgroupLimits(probe), AddressSpaceLimit(probe)}) {
    if (m && m->bytes < best.bytes) best = *m;
  }
  return best;
}

std::string BytesString(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB",
                                           "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(std::max<int64_t>(0, bytes), " bytes");
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit + 1 < 6) {
    v /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

}  // namespace cohort
