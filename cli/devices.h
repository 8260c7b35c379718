// The --devices flag of train, worker and local: which devices a process
// trains on.
//   cpu:N          N CPU replicas (1..256)
//   gpu:all        every CUDA device of the machine
//   gpu:0,2        these CUDA devices
// Without the flag: every GPU if the machine has one, else cpu:1. The older
// --replicas=cpu:N is accepted as a synonym.
//
// Thread safety: stateless functions.
#ifndef COHORT_CLI_DEVICES_H_
#define COHORT_CLI_DEVICES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort {

struct Devices {
  int cpu_replicas = 0;   // > 0: train on CPU replicas
  std::vector<int> gpus;  // non-empty: train on these CUDA devices
  // "cpu:2" or "gpu:0,1": the flag value that selects these devices.
  std::string ToString() const;
  // Local replicas: CPU replicas or GPUs.
  int replicas() const;
};

// `value` as above ("" for the default), on a machine with `gpu_count`
// CUDA devices (`no_gpu_reason` says why there are none). INVALID_ARGUMENT
// names the flag and the value.
absl::StatusOr<Devices> ParseDevices(const std::string& value, int gpu_count,
                                     const std::string& no_gpu_reason);

// ParseDevices on this machine's devices, from --devices and --replicas
// (at most one of them given).
absl::StatusOr<Devices> ResolveDevices(const std::string& devices_flag,
                                       const std::string& replicas_flag);

// The GPUs of `d` dealt to `workers` worker processes of one machine
// (worker i gets every workers-th GPU from the i-th); CPU devices are the
// same for every worker. INVALID_ARGUMENT when there are fewer GPUs than
// workers.
absl::StatusOr<std::vector<Devices>> SplitDevices(const Devices& d,
                                                  int workers);

}  // namespace cohort

#endif  // COHORT_CLI_DEVICES_H_
