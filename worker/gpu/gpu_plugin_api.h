// The GPU engine's entry points, as the cohort binary finds them in the GPU
// plugin (libcohort_gpu.so). The binary itself links no CUDA library: it
// opens the plugin with dlopen only when a run asks for GPUs (or when
// --devices is left to its default and an NVIDIA driver is present), so
// that the CLI, the coordinator and CPU workers start fast and run where no
// CUDA library is installed (worker/gpu/gpu_plugin.h is the loader).
//
// The plugin is built from the same tree as the binary and resolves what
// it shares with it (the model, data sets, loader, checkpoint code, protos)
// against the binary's own exported symbols, so one copy of each exists in
// the process. This header needs no CUDA headers.
#ifndef COHORT_WORKER_GPU_GPU_PLUGIN_API_H_
#define COHORT_WORKER_GPU_GPU_PLUGIN_API_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/cuda/cuda_devices.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/engine/device_engine.h"
#include "worker/trainer.h"

namespace cohort {

class KvClient;

// Where a GPU worker's devices sit in its job.
struct GpuWorkerPlacement {
  int rank = 0;            // the worker's rank
  int world_size = 1;      // workers
  int replica_offset = 0;  // global rank of its first GPU
  int total_replicas = 1;  // GPUs in the job
  std::vector<int> gpus;   // its CUDA devices
};

// Bumped whenever GpuPluginApi or a type it passes changes; the sizes
// below catch a plugin left over from another build as well.
inline constexpr int kGpuPluginAbiVersion = 2;

// The struct the plugin's one exported function returns. Every pointer is
// set; the functions are thread-safe as their counterparts in
// worker/gpu/gpu_engine.h and kernels/cuda/device.h say.
struct GpuPluginApi {
  int abi_version = kGpuPluginAbiVersion;
  size_t train_options_size = sizeof(TrainOptions);
  size_t distributed_context_size = sizeof(DistributedContext);
  size_t placement_size = sizeof(GpuWorkerPlacement);
  // The visible CUDA devices, or why there are none. Never fails.
  CudaDevices (*find_devices)() = nullptr;
  // The GPU engine for options.gpus (non-empty); see CreateGpuEngine.
  absl::StatusOr<std::unique_ptr<DeviceEngine>> (*create_engine)(
      const JobSpec& spec, const TrainOptions& options,
      const DataSplits& data) = nullptr;
  // A GPU worker's NCCL communicators; see CreateWorkerNccl.
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> (*create_worker_nccl)(
      KvClient& kv, const std::string& key_prefix,
      const GpuWorkerPlacement& placement, const std::string& algorithm,
      absl::Duration timeout) = nullptr;
};

// The plugin's only exported symbol (C linkage, so dlsym finds it by this
// name).
inline constexpr char kGpuPluginEntry[] = "cohort_gpu_plugin_api";
using GpuPluginEntry = const GpuPluginApi* (*)();

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_GPU_PLUGIN_API_H_
