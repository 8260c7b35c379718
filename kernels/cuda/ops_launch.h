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

#include "common/update_options.h"

namespace cohort {
namespace gpu {
namespace ops_internal {

// SGD. `momentum_buffer` null selects the momentum-free update.
void LaunchSgd(float* params, const float* grads, float* momentum_buffer,
               int64_t n, float lr, float weight_decay, float momentum,
               bool nesterov, cudaStream_t stream);

// Adam's per-step scalars, made on the host by MakeAdamScalars
// (common/update_options.h, the one definition the CPU rules use too).
using AdamScalars = ::cohort::AdamScalars<float>;
void LaunchAdam(float* params, const float* grads, float* m, float* v,
                int64_t n, const AdamScalars& s, cudaStream_t stream);

// RMSprop over [0, n) with weight decay `wd`; `b` (momentum buffer) null
// without momentum, `a` (gradient average) null unless centered.
void LaunchRmsprop(float* params, const float* grads, float* square_avg,
                   float* b, float* a, int64_t n, float lr, float wd,
                   float alpha, float eps, float momentum, cudaStream_t stream);

// LAMB's and LARS's per-step scalars, made on the host (ops.cc) as the
// CPU rules make them.
struct LambScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float inv_bc1;   // 1 / (1 - beta1^t)
  float bc2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float weight_decay;
};
struct LarsScalars {
  float momentum;  // 0: no buffer
  double weight_decay;
  double trust_coefficient;
};
// The pieces of the flat buffer: 4 int64 per piece {begin, end, tensor,
// decay}, and num_tensors + 1 int64 `tensor_pieces` (tensor t's pieces are
// [tensor_pieces[t], tensor_pieces[t + 1])). `sums` holds 2 doubles per
// piece, `totals` 2 per tensor.
struct Pieces {
  const int64_t* pieces;
  const int64_t* tensor_pieces;
  int64_t num_pieces;
  int32_t num_tensors;
  double* sums;
  double* totals;
};
// Three launches: per-piece sums (LAMB also advances m and v), the fold
// per tensor, the update.
void LaunchLamb(float* params, const float* grads, float* m, float* v,
                const LambScalars& s, float lr, const Pieces& pieces,
                cudaStream_t stream);
void LaunchLars(float* params, const float* grads, float* b,
                const LarsScalars& s, double lr, const Pieces& pieces,
                cudaStream_t stream);

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
