// How much memory this process can still allocate, read at run time.
//
// Three limits can stop an allocation, and the tightest one counts:
//   - the machine's MemAvailable (/proc/meminfo: free memory plus what the
//     kernel can reclaim without swapping);
//   - the memory limit of the process's cgroup and of every cgroup above it
//     (v2 memory.max, v1 memory.limit_in_bytes), less what the group
//     already uses apart from reclaimable inactive page cache: a container's
//     limit, which MemAvailable knows nothing about;
//   - the address-space limit (RLIMIT_AS, `ulimit -v`) less what the process
//     has mapped already.
// The reading is a snapshot, good for an up-front "will this fit" check; it
// is not a reservation.
//
// Thread safety: all functions may be called concurrently.
#ifndef COHORT_COMMON_MACHINE_MEMORY_H_
#define COHORT_COMMON_MACHINE_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace cohort {

struct AvailableMemory {
  int64_t bytes = 0;
  // Which limit it is, for messages: "MemAvailable", "the cgroup memory
  // limit of 4.0 GiB, 1.2 GiB in use", "ulimit -v of 2.0 GiB, 150.0 MiB
  // mapped".
  std::string source;
};

// Where DetectAvailableMemory reads; tests point it at a fake tree.
struct MemoryProbe {
  std::string proc_root = "/proc";  // meminfo, self/cgroup, self/status
  std::string cgroup_root = "/sys/fs/cgroup";  // v2 unified, or v1 controllers
  bool address_space_limit = true;             // consider RLIMIT_AS
};

// The tightest of the limits above. NotFound when /proc/meminfo cannot be
// read (not Linux): the caller then has nothing to compare with.
absl::StatusOr<AvailableMemory> DetectAvailableMemory(
    const MemoryProbe& probe = MemoryProbe());

// "512 bytes", "3.4 KiB", "21.7 GiB", "6.1 TiB": binary units, one
// decimal. Negative counts read as 0.
std::string BytesString(int64_t bytes);

}  // namespace cohort

#endif  // COHORT_COMMON_MACHINE_MEMORY_H_
