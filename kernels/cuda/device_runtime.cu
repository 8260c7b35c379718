// CUDA side of kernels/cuda/device.h. Plain C++ types only at this
// boundary, so that host code never needs nvcc.
#include <cuda_runtime.h>

#include "kernels/cuda/device_runtime.h"

namespace cohort {
namespace cuda_internal {
namespace {

__global__ void AxpyKernel(int n, float alpha, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += alpha * x[i];
}

}  // namespace

int DeviceCount(const char** error) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    return 0;
  }
  return count;
}

bool DeviceName(int device, char* name, int capacity, const char** error) {
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    return false;
  }
  int i = 0;
  for (; i + 1 < capacity && prop.name[i] != '\0'; ++i) name[i] = prop.name[i];
  name[i] = '\0';
  return true;
}

bool AxpyOnDevice(int device, int n, float alpha, const float* x, float* y,
                  const char** error) {
  float* dx = nullptr;
  float* dy = nullptr;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMalloc(&dx, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dy, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    AxpyKernel<<<(n + 255) / 256, 256>>>(n, alpha, dx, dy);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    return false;
  }
  return true;
}

}  // namespace cuda_internal
}  // namespace cohort
