// CPU kernels for batch normalization over per-channel data.
//
// One layout description covers both activation layouts of the engine:
// element (o, c, i) of a {outer, channels, inner} array is channel c's.
// Dense {N, F} is {N, F, 1}; batch-inner {C, N, L} and {C, N, H, W} are
// {1, C, N * L} and {1, C, N * H * W}, where each channel is contiguous.
// Sums are accumulated in double (PyTorch's accumulation type for float on
// CPU) so statistics of 10^6-element channels stay accurate.
//
// Plain functions of raw pointers; they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Instantiated for float and
// double; float has AVX2 paths for contiguous channels.
#ifndef COHORT_KERNELS_BATCHNORM_H_
#define COHORT_KERNELS_BATCHNORM_H_

#include <cstdint>

#include "kernels/fused_activation.h"

namespace cohort {

struct ChannelLayout {
  int64_t outer = 1;
  int64_t channels = 0;
  int64_t inner = 1;
  // Elements per channel.
  int64_t count() const { return outer * inner; }
};

// Per channel mean and biased variance (one pass over x, shifted by each
// channel's first element so that a large mean does not cancel the variance).
template <typename T>
void ChannelMeanVar(const ChannelLayout& l, const T* x, double* mean,
                    double* var);

// y = act((x - mean[c]) * scale[c] + shift[c]), the product and sum one
// fused multiply-add. `y` may equal `x`.
template <typename T>
void ChannelNormalize(const ChannelLayout& l, const T* x, const T* mean,
                      const T* scale, const T* shift, FusedActivation act,
                      T* y);

// The backward passes below take dy through `act` first (the gradient of
// the activation layer that `act` stands for, with its bits). Its mask
// comes from the activation's input, recomputed from x with the `scale`
// and `shift` that ChannelNormalize applied, bit for bit as it did: that
// reads no tensor beyond dy and x, where the activated output would be a
// third. `scale` and `shift` are not read, and may be null, for kNone.
template <typename T>
struct ActivationInput {
  const T* scale = nullptr;
  const T* shift = nullptr;
};

// sum_dy[c] = sum of dy; sum_dy_xc[c] = sum of dy * (x - mean[c]).
template <typename T>
void ChannelGradSums(const ChannelLayout& l, const T* dy, const T* x,
                     ActivationInput<T> z, FusedActivation act, const T* mean,
                     double* sum_dy, double* sum_dy_xc);

// dx = a[c] * dy + b[c] * (x - mean[c]) + d[c]: the input gradient of batch
// norm in train mode (and, with b = d = 0, in eval mode).
template <typename T>
void ChannelInputGrad(const ChannelLayout& l, const T* dy, const T* x,
                      ActivationInput<T> z, FusedActivation act, const T* mean,
                      const T* a, const T* b, const T* d, T* dx);

}  // namespace cohort

#endif  // COHORT_KERNELS_BATCHNORM_H_
