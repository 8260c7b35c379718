#include "kernels/cuda/device.h"

#include "absl/strings/str_cat.h"

#ifdef COHORT_WITH_CUDA
#include "kernels/cuda/device_runtime.h"
#endif

namespace cohort {

#ifdef COHORT_WITH_CUDA

bool BuiltWithCuda() { return true; }

CudaDevices FindCudaDevices() {
  CudaDevices out;
  const char* error = nullptr;
  const int n = cuda_internal::DeviceCount(&error);
  if (n == 0) {
    out.reason = error != nullptr ? error : "no CUDA device";
    return out;
  }
  for (int d = 0; d < n; ++d) {
    char name[256];
    if (!cuda_internal::DeviceName(d, name, sizeof(name), &error)) {
      out.names.push_back(absl::StrCat("GPU ", d, " (", error, ")"));
    } else {
      out.names.push_back(name);
    }
  }
  return out;
}

absl::Status CudaAxpy(int device, float alpha, const std::vector<float>& x,
                      std::vector<float>* y) {
  if (x.size() != y->size()) {
    return absl::InvalidArgumentError("CudaAxpy: x and y differ in length");
  }
  const char* error = nullptr;
  if (!cuda_internal::AxpyOnDevice(device, static_cast<int>(x.size()), alpha,
                                   x.data(), y->data(), &error)) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device, ": ", error));
  }
  return absl::OkStatus();
}

#else  // !COHORT_WITH_CUDA

bool BuiltWithCuda() { return false; }

CudaDevices FindCudaDevices() {
  return {{}, "built without CUDA (--config=nocuda)"};
}

absl::Status CudaAxpy(int, float, const std::vector<float>&,
                      std::vector<float>*) {
  return absl::UnimplementedError("built without CUDA (--config=nocuda)");
}

#endif

}  // namespace cohort
