// Elementwise and optimizer CUDA kernels over flat float32 device buffers:
// fused SGD (momentum, Nesterov, weight decay), Adam/AdamW and RMSprop
// steps, LAMB and LARS (per-tensor norms by a reduction over pieces),
// gradient scaling and summation, bias + activation forward/backward,
// float32 <-> bf16/fp16 casts and dropout.
//
// Each function checks its arguments, launches on `stream` and returns
// without waiting: an OK status means the launch was accepted; faults while
// the kernel runs surface at the caller's next synchronization. Arguments
// are checked before anything touches the device, so bad arguments fail the
// same way on machines without a GPU. Sizes are int64_t element counts; a
// count of zero launches nothing.
//
// The mathematics is the CPU engine's, operation for operation, so results
// agree to float rounding (and bit-for-bit where the operations are the
// same IEEE ones): kernels/update_rules.h for the optimizers,
// kernels/elementwise.h and worker/layers/{linear,conv,activation,dropout}
// for the layers, kernels/cuda/ops_reference.h for the casts and dropout
// masks (re-exported here).
//
// Ownership: every pointer is device memory owned by the caller; functions
// keep nothing past their return. 16-bit buffers are uint16_t bit patterns
// (see ops_reference.h). Thread safety: functions are stateless and may be
// called from any thread; the usual CUDA rules apply to the buffers (no
// other stream may write them until the work on `stream` is done).
#ifndef COHORT_KERNELS_CUDA_OPS_H_
#define COHORT_KERNELS_CUDA_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/update_options.h"
#include "kernels/cuda/ops_reference.h"
#include "kernels/update_rules.h"

namespace cohort {
namespace gpu {

// ---------------------------------------------------------------- optimizers

// The optimizers' hyper-parameters, one definition with the CPU rules
// (common/update_options.h); the kernels round them to float as the CPU
// UpdateRule<float> does.
using ::cohort::AdamOptions;
using ::cohort::LambOptions;
using ::cohort::LarsOptions;
using ::cohort::RmspropOptions;
using ::cohort::SgdOptions;

// One SGD step over `n` parameters:
//   g = grad + wd * p;  b = mu * b + g;  d = nesterov ? g + mu * b : b;
//   p -= lr * d        (without momentum: p -= lr * g)
// `momentum_buffer` (n floats, zero before the first step) is required when
// momentum != 0 and ignored (may be null) otherwise.
absl::Status SgdStep(float* params, const float* grads, float* momentum_buffer,
                     int64_t n, double lr, const SgdOptions& options,
                     cudaStream_t stream);

// One Adam/AdamW step over `n` parameters with moments `m` and `v` (n floats
// each, zero before the first step). `step` counts the steps taken
// including this one (1 on the first call): it sets the bias corrections,
// computed on the host by MakeAdamScalars (common/update_options.h), as
// the CPU rules compute them.
absl::Status AdamStep(float* params, const float* grads, float* m, float* v,
                      int64_t n, double lr, int64_t step,
                      const AdamOptions& options, cudaStream_t stream);

// One RMSprop step over `n` parameters (kernels/update_rules.h has the
// formula), weight decay options.weight_decay. `square_avg` (n floats) is
// required; `momentum_buffer` when options.momentum > 0 and `grad_avg` when
// options.centered (n floats each, zero before the first step; ignored and
// may be null otherwise).
absl::Status RmspropStep(float* params, const float* grads, float* square_avg,
                         float* momentum_buffer, float* grad_avg, int64_t n,
                         double lr, const RmspropOptions& options,
                         cudaStream_t stream);

// The pieces of a flat buffer on the device, for LAMB's and LARS's
// per-tensor norms: kernels/update_rules.h's layout of the whole buffer
// (MakeRuleLayout(tensors, 0, n)) as PieceTableArrays lays it out, and
// scratch for the sums. All device memory owned by the caller.
struct PieceTable {
  const int64_t* pieces = nullptr;         // 4 per piece
  const int64_t* tensor_pieces = nullptr;  // num_tensors + 1
  int64_t num_pieces = 0;
  int32_t num_tensors = 0;
  double* sums = nullptr;    // 2 per piece
  double* totals = nullptr;  // 2 per tensor
};

// The host arrays behind PieceTable::pieces ({begin, end, tensor, decay}
// per piece, in the buffer's elements) and tensor_pieces, for `whole`.
void PieceTableArrays(const RuleLayout& whole, std::vector<int64_t>* pieces,
                      std::vector<int64_t>* tensor_pieces);

// One LAMB step (kernels/update_rules.h) over the pieces of `table`, moments
// `m` and `v` zero before the first step; `step` counts the steps taken,
// this one included. The ratios come from each tensor's whole norms: the
// piece sums are reduced in a fixed order (no atomics), so a step is
// deterministic.
absl::Status LambStep(float* params, const float* grads, float* m, float* v,
                      double lr, int64_t step, const LambOptions& options,
                      const PieceTable& table, cudaStream_t stream);

// One LARS step (kernels/update_rules.h) over the pieces of `table`;
// `momentum_buffer` as SgdStep's.
absl::Status LarsStep(float* params, const float* grads, float* momentum_buffer,
                      double lr, const LarsOptions& options,
                      const PieceTable& table, cudaStream_t stream);

// ------------------------------------------------------ gradient averaging

// y *= scale.
absl::Status ScaleInPlace(float* y, int64_t n, float scale,
                          cudaStream_t stream);

// out = (inputs[0] + inputs[1] + ... + inputs[k-1]) * scale, summed left to
// right in float (one local-replica average with scale = 1 / k). `inputs` is
// a host array of k >= 1 device pointers; `out` may be one of them.
absl::Status SumScaled(const float* const* inputs, int k, int64_t n,
                       float scale, float* out, cudaStream_t stream);

// ----------------------------------------------------- bias + activation

enum class Activation { kIdentity, kRelu };

// How a bias vector lines up with a row-major {rows, cols} activation:
//   kPerColumn: dense {N, F} activations of Linear, bias[cols];
//   kPerRow:    channel-major {C, N * H * W} activations of convolutions
//               (worker/layers/layer.h), bias[rows].
enum class BiasLayout { kPerColumn, kPerRow };

// y = act(x + bias) over a {rows, cols} activation. `bias` may be null (no
// bias: y = act(x)); `y` may equal `x`.
absl::Status BiasActivationForward(const float* x, const float* bias,
                                   int64_t rows, int64_t cols,
                                   BiasLayout layout, Activation act, float* y,
                                   cudaStream_t stream);

// dx = dy * act'(y) with y the forward output (ReLU: dy where y > 0, else
// 0, as the CPU ReluBackward), and, unless `bias_grad` is null, the bias
// gradient: the sums of dx over columns (kPerRow, bias_grad[rows]) or over
// rows (kPerColumn, bias_grad[cols]), accumulated in double and overwriting
// `bias_grad`. `dx` may equal `dy`. The sums are deterministic (no atomics).
absl::Status BiasActivationBackward(const float* y, const float* dy,
                                    int64_t rows, int64_t cols,
                                    BiasLayout layout, Activation act,
                                    float* dx, float* bias_grad,
                                    cudaStream_t stream);

// ------------------------------------------------------------------- casts

// Round to nearest even (overflow to infinity, NaN to 0x7fff), bit-for-bit
// Bf16FromFloat / Fp16FromFloat; widening is exact. `in` and `out` must not
// overlap.
absl::Status FloatToBf16(const float* in, uint16_t* out, int64_t n,
                         cudaStream_t stream);
absl::Status Bf16ToFloat(const uint16_t* in, float* out, int64_t n,
                         cudaStream_t stream);
absl::Status FloatToFp16(const float* in, uint16_t* out, int64_t n,
                         cudaStream_t stream);
absl::Status Fp16ToFloat(const uint16_t* in, float* out, int64_t n,
                         cudaStream_t stream);

// ----------------------------------------------------------------- dropout

// Inverted dropout with drop probability p in [0, 1):
//   out[i] = in[i] * (keep_i ? 1 / (1 - p) : 0)
// with keep_i = DropoutKeep(seed, offset + i, DropoutThreshold(p))
// (kernels/cuda/dropout_rng.h) and 1 / (1 - p) rounded to float, as the CPU
// layer scales. `mask` (n bytes, 1 = kept) is written unless null. Give
// each call its own (seed, offset) range: the same range gives the same
// mask. `out` may equal `in`.
absl::Status DropoutForward(const float* in, float* out, uint8_t* mask,
                            int64_t n, double p, uint64_t seed, uint64_t offset,
                            cudaStream_t stream);

// grad_in = grad_out * (keep_i ? 1 / (1 - p) : 0), regenerating the mask of
// the DropoutForward call with the same (p, seed, offset).
// `grad_in` may equal `grad_out`.
absl::Status DropoutBackward(const float* grad_out, float* grad_in, int64_t n,
                             double p, uint64_t seed, uint64_t offset,
                             cudaStream_t stream);

}  // namespace gpu
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_OPS_H_
