// CUDA kernels of the smooth and leaky activations, LayerNorm/GroupNorm and
// 1-D pooling, over float32 NCHW activations (the GPU engine's
// layout, worker/gpu/layers/gpu_layer.h). The mathematics is the CPU
// engine's (kernels/activations.h, worker/layers/norm.h, kernels/pool1d.h);
// statistics and parameter gradients are summed in double, in a fixed order
// (no atomics), so results are deterministic.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted. Arguments are
// checked before anything touches the device, so bad arguments fail the
// same way on machines without a GPU. A count of zero launches nothing.
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. Thread safety: stateless; the usual CUDA
// rules apply to the buffers.
#ifndef COHORT_KERNELS_CUDA_LAYER_OPS_H_
#define COHORT_KERNELS_CUDA_LAYER_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/activations.h"

namespace cohort {
namespace gpu {

// out = f(in) and grad_in = grad_out * f'(in) over `n` floats, f one of
// kernels/activations.h's kinds (`slope`: LeakyReLU's negative slope).
// `out` may equal `in`; `grad_in` may equal `grad_out`.
absl::Status ActivationForward(ActivationKind kind, float slope,
                               const float* in, float* out, int64_t n,
                               cudaStream_t stream);
absl::Status ActivationBackward(ActivationKind kind, float slope,
                                const float* in, const float* grad_out,
                                float* grad_in, int64_t n, cudaStream_t stream);

// Normalisation over `rows` contiguous rows of `row_size` floats (one row
// per (sample, group) of an NCHW batch: LayerNorm has one group, a row is
// the sample), with biased variance. The affine parameters (null: none)
// are indexed per element of the sample (`per_element`, LayerNorm: weight
// [groups * row_size], here groups = 1) or per channel (GroupNorm: a row
// holds row_size / inner channels of `inner` positions, weight[C]).
struct NormGeometry {
  int64_t rows = 0;  // N * groups
  int64_t groups = 1;
  int64_t row_size = 0;  // (C / groups) * inner
  int64_t inner = 1;     // positions per channel (H * W, L or 1)
  bool per_element = false;
};

// y = (x - mean) * invstd [* weight + bias]; writes mean and invstd
// (rows floats each) for backward.
absl::Status NormForward(const NormGeometry& g, float eps, const float* x,
                         const float* weight, const float* bias, float* y,
                         float* mean, float* invstd, cudaStream_t stream);

// dx (unless null) = invstd * (gy - mean(gy) - xh * mean(gy * xh)) with
// gy = dy * weight; weight_grad and bias_grad (unless weight is null) =
// the sums of dy * xh and dy over the batch, overwritten.
absl::Status NormBackward(const NormGeometry& g, const float* x,
                          const float* dy, const float* weight,
                          const float* mean, const float* invstd, float* dx,
                          float* weight_grad, float* bias_grad,
                          cudaStream_t stream);

// 1-D pooling over `planes` contiguous rows of `in_l` (NCL: planes = N*C),
// PyTorch's MaxPool1d/AvgPool1d (floor mode, padding counted in the
// average). Max pooling writes the argmax position (int32) per output.
struct Pool1dShape {
  int64_t planes = 0, in_l = 0, out_l = 0;
  int64_t kernel = 1, stride = 1, padding = 0;
};
absl::Status MaxPool1dForward(const Pool1dShape& s, const float* in, float* out,
                              int32_t* argmax, cudaStream_t stream);
absl::Status MaxPool1dBackward(const Pool1dShape& s, const float* grad_out,
                               const int32_t* argmax, float* grad_in,
                               cudaStream_t stream);
absl::Status AvgPool1dForward(const Pool1dShape& s, const float* in, float* out,
                              cudaStream_t stream);
absl::Status AvgPool1dBackward(const Pool1dShape& s, const float* grad_out,
                               float* grad_in, cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_LAYER_OPS_H_
