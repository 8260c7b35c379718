// Reductions of float32 device buffers for the GPU engine: sum, sum of
// squares (gradient norms), max-abs, and the column / row sums of a
// row-major [rows, cols] matrix (bias gradients: columns for dense {N, F}
// activations, rows for batch-inner spatial {C, N*H*W} ones).
//
// Deterministic: every kernel accumulates in double and adds in an order
// that depends only on the sizes (two passes -- fixed per-block partials,
// then one block -- no atomics), so a result is the same bits on every run
// and every GPU. Accuracy is that of a double sum rounded once to float.
//
// The *Async functions enqueue on `stream` and return at once, with the
// status of argument checks and launches only; faults during execution show
// at the next synchronization. All pointers are device memory on the
// current device (cudaSetDevice), owned by the caller, and must stay valid
// until the stream has run the work. The float-returning variants
// synchronize `stream`. Thread safety: the functions keep no state; calls on
// different streams may run concurrently, but two calls must not share a
// workspace unless ordered on one stream.
//
// CUDA builds only (the header includes the CUDA runtime for cudaStream_t).
#ifndef COHORT_KERNELS_CUDA_REDUCE_H_
#define COHORT_KERNELS_CUDA_REDUCE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort {

// Bytes of device scratch SumAsync / SumSquaresAsync / MaxAbsAsync need for
// n elements (at most 8 KiB; the workspace must be 8-byte aligned, as
// cudaMalloc's is).
size_t ReduceWorkspaceBytes(int64_t n);

// *out = sum of x[0, n) (0 for n == 0).
absl::Status SumAsync(const float* x, int64_t n, float* out, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream);

// *out = sum of x[i]^2; the squared L2 norm, e.g. for gradient clipping.
absl::Status SumSquaresAsync(const float* x, int64_t n, float* out,
                             void* workspace, size_t workspace_bytes,
                             cudaStream_t stream);

// *out = max |x[i]| (0 for n == 0; NaN when any element is NaN, so that a
// diverged gradient is noticed).
absl::Status MaxAbsAsync(const float* x, int64_t n, float* out, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream);

// out[j] = sum over i of x[i * cols + j], for x [rows, cols] row-major; out
// has `cols` floats and is overwritten (zeros when rows == 0).
absl::Status ColumnSumsAsync(const float* x, int64_t rows, int64_t cols,
                             float* out, cudaStream_t stream);

// out[i] = sum over j of x[i * cols + j]; out has `rows` floats, overwritten.
absl::Status RowSumsAsync(const float* x, int64_t rows, int64_t cols,
                          float* out, cudaStream_t stream);

// The same reductions returning the value to the host: they allocate their
// scratch stream-ordered (cudaMallocAsync), run on `stream`, and
// synchronize it (so everything queued before on `stream` finishes too).
absl::StatusOr<float> Sum(const float* x, int64_t n, cudaStream_t stream);
absl::StatusOr<float> SumSquares(const float* x, int64_t n,
                                 cudaStream_t stream);
absl::StatusOr<float> MaxAbs(const float* x, int64_t n, cudaStream_t stream);

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_REDUCE_H_
