// For GPU tests: skip, naming why, unless the machine has enough CUDA
// devices (CI and GPU-less machines skip every GPU test this way).
//   REQUIRE_GPUS(2);  // at least two devices
//   REQUIRE_GPU();    // at least one
#ifndef COHORT_KERNELS_CUDA_REQUIRE_GPUS_H_
#define COHORT_KERNELS_CUDA_REQUIRE_GPUS_H_

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

#define REQUIRE_GPUS(n)                                                     \
  do {                                                                      \
    const ::cohort::CudaDevices found_ = ::cohort::FindCudaDevices();       \
    if (static_cast<int>(found_.names.size()) < (n)) {                      \
      GTEST_SKIP() << "no CUDA device: needs " << (n) << ", found "         \
                   << found_.names.size()                                   \
                   << (found_.reason.empty() ? "" : ": ") << found_.reason; \
    }                                                                       \
  } while (0)

#define REQUIRE_GPU() REQUIRE_GPUS(1)

#endif  // COHORT_KERNELS_CUDA_REQUIRE_GPUS_H_
