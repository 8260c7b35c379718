// The GPU plugin's one exported function (see gpu_plugin_api.h); the
// linker script gpu_plugin.lds keeps every other symbol of the plugin
// local.
#include "kernels/cuda/device.h"
#include "worker/gpu/gpu_engine.h"
#include "worker/gpu/gpu_plugin_api.h"

extern "C" __attribute__((visibility("default"))) const cohort::GpuPluginApi*
cohort_gpu_plugin_api() {
  static const cohort::GpuPluginApi api = [] {
    cohort::GpuPluginApi a;
    a.find_devices = &cohort::FindCudaDevices;
    a.create_engine = &cohort::CreateGpuEngine;
    a.create_worker_nccl = &cohort::CreateWorkerNccl;
    return a;
  }();
  return &api;
}
