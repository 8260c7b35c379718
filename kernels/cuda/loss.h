// Softmax cross-entropy on the GPU: forward and backward fused in one pass
// over the logits, the same mathematics as SoftmaxCrossEntropy in
// worker/loss.h (the CPU reference): logits dense [n, c] row-major (the
// class index is contiguous), one int32 label per row, the row maximum
// subtracted before exp, loss = mean over rows of -log softmax[label],
// grad = (softmax - onehot(label)) / n, and a row counts as correct when its
// first maximal logit is its label (the CPU's tie rule).
//
// With label smoothing e in [0, 1) (CudaCrossEntropyBuffers::label_smoothing)
// the target is (1 - e) onehot(label) + e / c, as on the CPU: loss
// (1 - e) nll + e mean_j nll_j, gradient (softmax - target) / n. e = 0 runs
// the same arithmetic as before smoothing existed, bit for bit.
//
// Labels outside [0, c): the CPU engine CHECK-fails; here the kernels never
// read or write out of bounds, they record the first such row in the
// workspace (its loss term and hit are 0, its gradient row zeros), and
// CheckSoftmaxCrossEntropyLabels / SoftmaxCrossEntropy turn it into
// INVALID_ARGUMENT naming the row and label. An async-only caller that
// skips the check gets a loss over the good rows divided by n.
//
// With NaN logits the loss is NaN as on the CPU, but the correct count may
// differ (the CPU scan sticks at a leading NaN; the GPU ignores NaNs).
//
// Memory: every pointer is device memory on the current device, owned by
// the caller, valid until the stream has run the work. Thread/stream
// safety: no state is kept; a workspace serves one call at a time (reuse it
// only on the same stream).
//
// CUDA builds only (the header includes the CUDA runtime for cudaStream_t).
#ifndef COHORT_KERNELS_CUDA_LOSS_H_
#define COHORT_KERNELS_CUDA_LOSS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort {

// Device buffers of one softmax cross-entropy call over n rows of c logits.
struct CudaCrossEntropyBuffers {
  const float* logits = nullptr;    // [n, c]
  const int32_t* labels = nullptr;  // [n]
  float* loss = nullptr;            // 1 float, overwritten: the batch mean
  float* grad = nullptr;            // [n, c], or null to skip the gradient
  // 1 counter or null; like the CPU's `correct` it is incremented by the
  // number of correct rows (zero it to count one batch).
  int64_t* correct = nullptr;
  // SoftmaxCrossEntropyWorkspaceBytes(n) bytes, 8-byte aligned.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // e in [0, 1); 0 is plain cross-entropy.
  float label_smoothing = 0;
  // Sequences (a language model's cross-entropy): with positions P >
  // 1 the n rows are n / P samples of P positions each, the logits (and
  // grad) are {n / P, c, P} (the GPU engine's NCHW {c, L} per sample: a
  // row's classes lie P apart) and labels[sample * P + position]. The loss
  // is the mean over all n = N * P positions. P must divide n.
  int64_t positions = 1;
};

// Device scratch a call over n rows needs: 12 bytes per row plus 8.
size_t SoftmaxCrossEntropyWorkspaceBytes(int64_t n);

// Enqueues the loss, gradient and count on `stream` and returns at once,
// with the status of the argument checks and launches only.
absl::Status SoftmaxCrossEntropyAsync(const CudaCrossEntropyBuffers& buffers,
                                      int64_t n, int64_t c,
                                      cudaStream_t stream);

// Synchronizes `stream`, then reports INVALID_ARGUMENT for the first row
// whose label was outside [0, c) in the last call that used
// `buffers.workspace` (reading that label back from `buffers.labels`).
absl::Status CheckSoftmaxCrossEntropyLabels(
    const CudaCrossEntropyBuffers& buffers, int64_t n, int64_t c,
    cudaStream_t stream);

// SoftmaxCrossEntropyAsync, then the label check, then the loss read back
// to the host (synchronizes `stream`).
absl::StatusOr<float> SoftmaxCrossEntropy(
    const CudaCrossEntropyBuffers& buffers, int64_t n, int64_t c,
    cudaStream_t stream);

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_LOSS_H_
