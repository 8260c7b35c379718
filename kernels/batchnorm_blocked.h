// CPU kernels for batch normalization of activations in oneDNN's
// channel-blocked layout nChw{B}c.
//
// The semantics, the double accumulation and the shifted one-pass variance
// are those of kernels/batchnorm.h; only the layout differs. Channel c of
// sample n at position p (p = h * W + w) sits at
//   ((n * (C / B) + c / B) * P + p) * B + c % B,
// so the B channels of one block are the fastest-moving index and the
// kernels' inner loops run across them.
//
// Each function handles the channels [c0, c1) only (c0 and c1 multiples of
// the block) and reads and writes nothing of other channels, so callers
// split channel blocks over threads. Per-channel arrays (mean, var, scale,
// shift, sums, a, b, d) are indexed by absolute channel.
//
// The backward kernels fuse the backward of a ReLU applied after the norm:
// given the `scale` and `shift` that BlockedNormalize applied with `relu`
// (and the same mean), they read dy as 0 wherever fma(x - mean, scale,
// shift), recomputed as it computed it, is not > 0 (NaN included): where
// its output is not > 0, exactly as if a separate ReLU backward had zeroed
// dy first. That reads no tensor beyond dy and x, where the ReLU's output
// would be a third. A null scale reads dy unchanged.
//
// Plain functions of raw pointers; they own nothing and keep no state, so
// they are thread-safe for disjoint channel ranges. Instantiated for float
// and double.
#ifndef COHORT_KERNELS_BATCHNORM_BLOCKED_H_
#define COHORT_KERNELS_BATCHNORM_BLOCKED_H_

#include <cstdint>

#include "kernels/batchnorm.h"

namespace cohort {

struct BlockedLayout {
  int64_t batch = 0;     // N
  int64_t channels = 0;  // C, a multiple of block
  int64_t spatial = 1;   // P = H * W
  // B: 8 (AVX2) or 16 (AVX-512); any divisor of 16 works.
  int64_t block = 16;
  // Elements per channel.
  int64_t count() const { return batch * spatial; }
};

// Per channel mean and biased variance of channels [c0, c1) (one pass over
// x, shifted by each channel's first element, (n, p) = (0, 0), so that a
// large mean does not cancel the variance).
template <typename T>
void BlockedMeanVar(const BlockedLayout& l, const T* x, int64_t c0, int64_t c1,
                    double* mean, double* var);

// y = (x - mean[c]) * scale[c] + shift[c], then max(y, 0) when `relu`.
// `y` may equal `x`.
template <typename T>
void BlockedNormalize(const BlockedLayout& l, const T* x, int64_t c0,
                      int64_t c1, const T* mean, const T* scale, const T* shift,
                      bool relu, T* y);

// y = (x - mean[c]) * scale[c] + shift[c] + r, then v > 0 ? v : +0 when
// `relu`: a residual block's last batch norm, its shortcut sum and the
// block's ReLU in one pass, with the bits of the three done in turn
// (BlockedNormalize without `relu`, AddInPlace, ReluForward). `r` has x's
// layout; `y` may equal x or r.
template <typename T>
void BlockedNormalizeSum(const BlockedLayout& l, const T* x, const T* r,
                         int64_t c0, int64_t c1, const T* mean, const T* scale,
                         const T* shift, bool relu, T* y);

namespace batchnorm_blocked_internal {
template <typename T>
struct Identity {
  using type = T;
};
}  // namespace batchnorm_blocked_internal

// T where template argument deduction does not look, so that callers may
// pass a plain {} for `relu` and T comes from the other arguments.
template <typename T>
using NotDeduced = typename batchnorm_blocked_internal::Identity<T>::type;

// sum_dy[c] = sum of dy; sum_dy_xc[c] = sum of dy * (x - mean[c]); dy
// masked by the ReLU of `relu` when its scale is not null.
template <typename T>
void BlockedGradSums(const BlockedLayout& l, const T* dy, const T* x,
                     ActivationInput<NotDeduced<T>> relu, int64_t c0,
                     int64_t c1, const T* mean, double* sum_dy,
                     double* sum_dy_xc);

// dx = a[c] * dy + b[c] * (x - mean[c]) + d[c]: the input gradient of batch
// norm in train mode (and, with b = d = 0, in eval mode). When the scale
// of `relu` is not null, dy is masked by its ReLU; the b and d terms stay
// where dy is masked. `dx` may equal `dy`.
template <typename T>
void BlockedInputGrad(const BlockedLayout& l, const T* dy, const T* x,
                      ActivationInput<NotDeduced<T>> relu, int64_t c0,
                      int64_t c1, const T* mean, const T* a, const T* b,
                      const T* d, T* dx);

}  // namespace cohort

#endif  // COHORT_KERNELS_BATCHNORM_BLOCKED_H_
