// absl::Status from CUDA runtime errors, for host code built with the
// toolkit (never included under --config=nocuda).
//
// Thread safety: stateless.
#ifndef COHORT_KERNELS_CUDA_CUDA_STATUS_H_
#define COHORT_KERNELS_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cohort {

// OK for cudaSuccess; otherwise INTERNAL (RESOURCE_EXHAUSTED for out of
// memory) naming `what` and the runtime's message, e.g.
// "sgd_momentum launch: invalid configuration argument".
inline absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorString(e),
                                           " (", cudaGetErrorName(e), ")");
  if (e == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

// The status of the last kernel launch on this thread (launch errors only;
// faults during execution surface at the next synchronization).
inline absl::Status LaunchStatus(absl::string_view kernel) {
  return CudaStatus(cudaGetLastError(), absl::StrCat(kernel, " launch"));
}

// Runs `f` (returning absl::Status) with `device` current and restores the
// caller's device after: the current device is per-thread state that the
// caller may rely on.
template <typename F>
absl::Status OnDevice(int device, F&& f) {
  int previous = 0;
  absl::Status s = CudaStatus(cudaGetDevice(&previous), "cudaGetDevice");
  if (s.ok() && previous != device) {
    s = CudaStatus(cudaSetDevice(device),
                   absl::StrCat("cudaSetDevice(", device, ")"));
  }
  if (!s.ok()) return s;
  s = f();
  // Restoring a device that was current a moment ago cannot fail.
  if (previous != device) cudaSetDevice(previous);
  return s;
}

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_CUDA_STATUS_H_
