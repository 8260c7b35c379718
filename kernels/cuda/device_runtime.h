// The narrow C++ interface between nvcc-compiled code and the rest of the
// build. Errors come back as the CUDA runtime's message in `*error`
// (a static string). Use kernels/cuda/device.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_DEVICE_RUNTIME_H_
#define COHORT_KERNELS_CUDA_DEVICE_RUNTIME_H_

namespace cohort {
namespace cuda_internal {

int DeviceCount(const char** error);
bool DeviceName(int device, char* name, int capacity, const char** error);
bool AxpyOnDevice(int device, int n, float alpha, const float* x, float* y,
                  const char** error);

}  // namespace cuda_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_DEVICE_RUNTIME_H_
