// Finds and opens the GPU plugin (libcohort_gpu.so, gpu_plugin_api.h) on
// demand, so that the cohort binary maps no CUDA library unless a run
// trains on GPUs.
//
// A binary that links the GPU engine in (the GPU tests and benchmarks)
// uses that; otherwise the plugin is looked for beside the running
// executable, then in ../lib/cohort/ relative to it (the layout of the
// container images and of the GPU test bundle). All functions are thread-safe;
// the plugin is opened at most once per process and never closed.
#ifndef COHORT_WORKER_GPU_GPU_PLUGIN_H_
#define COHORT_WORKER_GPU_GPU_PLUGIN_H_

#include <string>

#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_devices.h"
#include "worker/gpu/gpu_plugin_api.h"

namespace cohort {

// The plugin's file name.
inline constexpr char kGpuPluginFile[] = "libcohort_gpu.so";

// Whether this machine shows an NVIDIA driver (its device node or its
// /proc entry). Loads nothing; a yes does not promise a usable GPU.
bool NvidiaDriverPresent();

// Where the plugin is, without opening it (which loads CUDA): "linked into
// this binary", "found at PATH", "not installed (looked in ...)" or "none:
// this cohort was built without CUDA". For --version.
std::string DescribeGpuPlugin();

// Opens the plugin (once) and returns its entry points. Errors:
// FAILED_PRECONDITION when this cohort was built without CUDA, when the
// plugin is not installed, or when a library it needs (libcudart, cuBLAS,
// cuDNN, NCCL) cannot be loaded, with the library's name and the fix.
absl::StatusOr<const GpuPluginApi*> LoadGpuPlugin();

// The visible CUDA devices, from the plugin (which this loads); none, with
// why, when it cannot load or finds none. Callers that only want GPUs if
// there are any ask NvidiaDriverPresent() first.
CudaDevices FindGpus();

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_GPU_PLUGIN_H_
