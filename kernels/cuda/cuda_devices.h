// What device discovery found: the visible CUDA devices, or why there are
// none. A plain struct with no CUDA headers, so that code which never loads
// CUDA (the cohort binary's device flags, the GPU plugin's interface) can
// carry it.
#ifndef COHORT_KERNELS_CUDA_CUDA_DEVICES_H_
#define COHORT_KERNELS_CUDA_CUDA_DEVICES_H_

#include <string>
#include <vector>

namespace cohort {

struct CudaDevices {
  std::vector<std::string> names;  // one per visible GPU
  // Why there are none, when `names` is empty ("built without CUDA",
  // "CUDA driver version is insufficient ...").
  std::string reason;
};

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_CUDA_DEVICES_H_
