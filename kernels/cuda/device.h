// CUDA device discovery and a self-test kernel.
//
// Built with the CUDA toolkit by default; `--config=nocuda` builds a
// stand-in that reports no devices, so the rest of cohort runs on CPUs.
// A machine with the toolkit but no GPU (or no driver) also reports zero
// devices, with the runtime's reason. All functions are thread-safe.
#ifndef COHORT_KERNELS_CUDA_DEVICE_H_
#define COHORT_KERNELS_CUDA_DEVICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_devices.h"

namespace cohort {

// Never fails: no GPU is a normal answer.
CudaDevices FindCudaDevices();

// y += alpha * x on `device`; for self-tests and the GPU smoke test.
absl::Status CudaAxpy(int device, float alpha, const std::vector<float>& x,
                      std::vector<float>* y);

// Whether this binary was built with the CUDA toolkit.
bool BuiltWithCuda();

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_DEVICE_H_
