// For GPU kernel tests: one device allocation, filled from and read back to
// host vectors with gtest expectations on every CUDA call, freed at scope
// exit. Owns its allocation; not thread-safe; the current device's memory.
#ifndef COHORT_WORKER_GPU_DEVICE_BYTES_H_
#define COHORT_WORKER_GPU_DEVICE_BYTES_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), cudaSuccess);
  }
  template <typename T>
  explicit DeviceBytes(const std::vector<T>& host)
      : DeviceBytes(host.size() * sizeof(T)) {
    if (host.empty()) return;
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    // A pageable copy may still be landing when cudaMemcpy returns.
    cudaDeviceSynchronize();
  }
  ~DeviceBytes() { cudaFree(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  template <typename T>
  T* as() {
    return static_cast<T*>(ptr_);
  }
  template <typename T>
  std::vector<T> ToHost(size_t n) const {
    std::vector<T> out(n);
    EXPECT_EQ(
        cudaMemcpy(out.data(), ptr_, n * sizeof(T), cudaMemcpyDeviceToHost),
        cudaSuccess);
    return out;
  }

 private:
  void* ptr_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_DEVICE_BYTES_H_
