// Gradient clipping and accumulation on the GPU, as the CPU engine does
// them. Clipping (worker/optim/grad_clip.h and torch.nn.utils'
// clip_grad_value_ / clip_grad_norm_) works on the gradient averaged over
// the job, value clipping first, then the global norm. Accumulation
// (JobSpec.gradient_accumulation_steps) sums a step's batches' gradients,
// each weighted by its samples, and finishes with their mean over every
// sample.
//
// Every function checks their arguments, launch on `stream` and return
// without waiting. The norm's scale is computed on the device from a sum of
// squares another kernel wrote there (kernels/cuda/reduce.h), so clipping
// never makes the host wait for the GPU mid-step.
//
// Ownership: every pointer is device memory owned by the caller. Thread
// safety: stateless; the usual CUDA stream rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_GRAD_OPS_H_
#define COHORT_KERNELS_CUDA_GRAD_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace cohort {
namespace gpu {

// g = min(limit, max(-limit, g)) elementwise; limit > 0.
absl::Status ClampInPlace(float* g, int64_t n, float limit,
                          cudaStream_t stream);

// g *= min(1, max_norm / (sqrt(*sum_squares) + 1e-6)), the scale computed
// in double from the device scalar `sum_squares` (the sum of g's squares),
// as ClipScale does on the CPU; max_norm > 0.
absl::Status ClipToNormInPlace(float* g, int64_t n, const float* sum_squares,
                               double max_norm, cudaStream_t stream);

// acc = weight * g (`first`), else acc += weight * g; weight > 0 (a batch's
// samples).
absl::Status AccumulateScaled(const float* g, int64_t n, float weight,
                              bool first, float* acc, cudaStream_t stream);

// g = (acc + weight * g) * scale over [0, n): the last batch's gradient
// joined to the earlier ones' sum, times 1 / (all samples).
absl::Status FinishAccumulated(const float* acc, int64_t n, float weight,
                               float scale, float* g, cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_GRAD_OPS_H_
