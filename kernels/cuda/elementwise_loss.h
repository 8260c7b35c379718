// Elementwise losses on the GPU, forward and backward in one pass: the same
// mathematics as ElementwiseLoss in worker/loss.h (the CPU reference), each
// the mean over n elements of pred compared with target:
//   kMse    (p - t)^2                    gradient 2 (p - t) / n
//   kL1     |p - t|                      gradient sign(p - t) / n (0 at p == t)
//   kHuber  (p - t)^2 / 2 below delta,   gradient (p - t) / n, or
//           delta (|p - t| - delta / 2)  +-delta / n above
//   kBce    max(p, 0) - p t + log1p(exp(-|p|))   gradient (sigmoid(p) - t) / n
//
// The targets are float targets laid out as pred is, or, for class labels
// under an elementwise loss, the one-hot rows of int32 labels read in place
// (no target buffer is built): element i's target is 1 when labels[i / row]
// equals i % row, else 0. A label outside [0, row) gives an all-zero row,
// as the CPU's one-hot scratch does.
//
// The loss is reduced deterministically (per-block partial sums in double,
// a grid that depends on n alone, then one block in a fixed order; no
// atomics), so a run repeats bit for bit.
//
// Memory: every pointer is device memory on the current device, owned by
// the caller, valid until the stream has run the work. Thread/stream
// safety: no state is kept; a workspace serves one call at a time (reuse it
// only on the same stream).
//
// CUDA builds only (the header includes the CUDA runtime for cudaStream_t).
#ifndef COHORT_KERNELS_CUDA_ELEMENTWISE_LOSS_H_
#define COHORT_KERNELS_CUDA_ELEMENTWISE_LOSS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort {

// worker/loss.h's ElementLoss, for kernels/ (which may not depend on
// worker/).
enum class CudaElementLoss { kMse, kL1, kHuber, kBce };

// Device buffers of one elementwise loss call over n elements.
struct CudaElementwiseLossBuffers {
  const float* pred = nullptr;  // [n]
  // [n] float targets; or null, and the targets are one-hot rows of
  // `labels` ([n / row] labels, n a multiple of row).
  const float* target = nullptr;
  const int32_t* labels = nullptr;
  int64_t row = 0;
  float* loss = nullptr;  // 1 float, overwritten: the mean over elements
  float* grad = nullptr;  // [n], or null to skip the gradient
  // ElementwiseLossWorkspaceBytes(n) bytes, 8-byte aligned.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Device scratch a call over n elements needs: at most 8 KiB.
size_t ElementwiseLossWorkspaceBytes(int64_t n);

// Enqueues the loss and gradient on `stream` and returns at once, with the
// status of the argument checks and launches only. `delta` is the Huber
// threshold (> 0; ignored by the other kinds).
absl::Status ElementwiseLossAsync(CudaElementLoss kind, float delta,
                                  const CudaElementwiseLossBuffers& buffers,
                                  int64_t n, cudaStream_t stream);

// ElementwiseLossAsync, then the loss read back to the host (synchronizes
// `stream`).
absl::StatusOr<float> ElementwiseLoss(CudaElementLoss kind, float delta,
                                      const CudaElementwiseLossBuffers& buffers,
                                      int64_t n, cudaStream_t stream);

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ELEMENTWISE_LOSS_H_
