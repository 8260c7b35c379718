// The narrow interface between the nvcc-compiled softmax cross-entropy
// (loss.cu) and its host wrappers (loss.cc): plain C++ types and
// cudaStream_t only. Use kernels/cuda/loss.h instead.
#ifndef COHORT_KERNELS_CUDA_LOSS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_LOSS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cohort {
namespace cuda_internal {

// The caller's workspace, carved up: the first row with a label outside
// [0, c) (all bits set when none; the host clears it to that with
// cudaMemsetAsync(0xff) before the rows kernel), then per-row losses and
// per-row hits, which the finish kernel reduces in a fixed order (so the
// loss is deterministic and no atomics touch the caller's counter).
struct CrossEntropyWorkspace {
  unsigned long long* first_bad_row;
  double* row_loss;  // [n]
  int32_t* row_hit;  // [n]: 1 when the row's first maximal logit is the label
};

inline size_t CrossEntropyWorkspaceBytes(int64_t n) {
  return sizeof(unsigned long long) +
         static_cast<size_t>(n) * (sizeof(double) + sizeof(int32_t));
}

// `base` must be 8-byte aligned and hold CrossEntropyWorkspaceBytes(n).
inline CrossEntropyWorkspace CrossEntropyWorkspaceAt(void* base, int64_t n) {
  char* p = static_cast<char*>(base);
  double* row_loss = reinterpret_cast<double*>(p + sizeof(unsigned long long));
  return {reinterpret_cast<unsigned long long*>(p), row_loss,
          reinterpret_cast<int32_t*>(row_loss + n)};
}

// One block per row (n > 0): row losses, hits, the gradient when `grad` is
// not null, and the first bad row. `positions` 1: rows are contiguous
// [n, c]; else the logits (and grad) are {n / positions, c, positions}
// and row r is sample r / positions at position r % positions. `scale` is 1 / n
// as float, as the CPU engine computes it; `smooth` the label smoothing in [0,
// 1).
void LaunchCrossEntropyRows(const float* logits, const int32_t* labels,
                            int64_t n, int64_t c, int64_t positions,
                            float scale, float smooth, float* grad,
                            CrossEntropyWorkspace ws, cudaStream_t stream);

// One block: *loss = mean of the row losses (0 for n == 0) and, when
// `correct` is not null, *correct += the number of hits.
void LaunchCrossEntropyFinish(CrossEntropyWorkspace ws, int64_t n, float* loss,
                              int64_t* correct, cudaStream_t stream);

}  // namespace cuda_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_LOSS_LAUNCH_H_
