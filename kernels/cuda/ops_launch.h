// The boundary between kernels/cuda/ops.cc (gcc, absl::Status) and
// kernels/cuda/ops.cu (nvcc): plain C++ types and cudaStream_t only. Each
// Launch* function enqueues one kernel on `stream` and returns at once; the
// caller checks cudaGetLastError (LaunchStatus) right after. Arguments are
// assumed checked by ops.cc: n > 0, non-null pointers, valid enums.
// Use kernels/cuda/ops.h instead of this header.
#ifndef COHORT_KERNELS_CUDA_OPS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_OPS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/update_options.h"

namespace cohort {
namespace gpu {
namespace ops_internal {

// SGD. `momentum_buffer` null selects the momentum-free update.
void LaunchSgd(float* params, const float* grads, float* momentum_buffer,
               int64_t n, float lr, float weight_decay, float momentum,
               bool nesterov, cudaStream_t stream);

// Adam's per-step scalars, made on the host by MakeAdamScalars
// (kernels/update_options.h, the one definition the CPU rules use too).
using AdamScalars = ::cohort::AdamScalars<float>;
void LaunchAdam(float* params, const float* grads, float* m, float* v,
                int64_t n, const AdamScalars& s, cudaStream_t stream);

void LaunchScale(float* y, int64_t n, float scale, cudaStream_t stream);

// Up to this many inputs per summation kernel (passed by value in the
// kernel's parameters); SumScaled chains launches for more.
constexpr int kMaxSumInputs = 16;
struct SumInputs {
  const float* ptr[kMaxSumInputs];
  int count;  // 1..kMaxSumInputs
};
// out = ((accumulate ? out : 0) + ptr[0] + ... + ptr[count-1]) * scale, the
// additions in that order. Without `accumulate` the sum starts at ptr[0]
// (no +0, so -0 inputs stay -0). Pass scale = 1 for a partial sum.
void LaunchSum(const SumInputs& inputs, bool accumulate, float scale,
               float* out, int64_t n, cudaStream_t stream);

// activation: 0 identity, 1 ReLU; layout: 0 per column, 1 per row (the
// order of ops.h's enums). bias may be null.
void LaunchBiasActivationForward(const float* x, const float* bias,
                                 int64_t rows, int64_t cols, int layout,
                                 int activation, float* y, cudaStream_t stream);
// bias_grad may be null (only dx is written).
void LaunchBiasActivationBackward(const float* y, const float* dy, int64_t rows,
                                  int64_t cols, int layout, int activation,
                                  float* dx, float* bias_grad,
                                  cudaStream_t stream);

void LaunchFloatToBf16(const float* in, uint16_t* out, int64_t n,
                       cudaStream_t stream);
void LaunchBf16ToFloat(const uint16_t* in, float* out, int64_t n,
                       cudaStream_t stream);
void LaunchFloatToFp16(const float* in, uint16_t* out, int64_t n,
                       cudaStream_t stream);
void LaunchFp16ToFloat(const uint16_t* in, float* out, int64_t n,
                       cudaStream_t stream);

// out[i] = in[i] * (DropoutKeep(seed, offset + i, threshold) ? scale : 0);
// mask[i] = keep (unless mask is null).
void LaunchDropout(const float* in, float* out, uint8_t* mask, int64_t n,
                   uint64_t threshold, float scale, uint64_t seed,
                   uint64_t offset, cudaStream_t stream);

}  // namespace ops_internal
}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_OPS_LAUNCH_H_
