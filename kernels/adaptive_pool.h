// CPU kernels of 2-D adaptive average pooling (PyTorch's
// nn.AdaptiveAvgPool2d) over "planes": a batch-inner {C, N, H, W} tensor is
// C*N contiguous H x W planes, as in kernels/pool.h.
//
// Output cell (i, j) of an out_h x out_w plane averages input rows
// [AdaptiveBegin(i, in_h, out_h), AdaptiveEnd(i, in_h, out_h)) and the
// columns likewise: PyTorch's floor/ceil rule, so windows may overlap and
// differ in size, and an output larger than the input repeats rows. The
// bounds are constexpr so that the CUDA kernels (kernels/cuda/adaptive_pool.h)
// share them.
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Instantiated for float and
// double.
#ifndef COHORT_KERNELS_ADAPTIVE_POOL_H_
#define COHORT_KERNELS_ADAPTIVE_POOL_H_

#include <cstdint>

namespace cohort {

// floor(i * in / out): the first input index of output i's window.
constexpr int64_t AdaptiveBegin(int64_t i, int64_t in, int64_t out) {
  return i * in / out;
}

// ceil((i + 1) * in / out): one past its last input index.
constexpr int64_t AdaptiveEnd(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// The outputs whose windows hold input index `x`: [AdaptiveFirstCover,
// AdaptiveLastCover], never empty. The GPU's backward gathers through them.
constexpr int64_t AdaptiveFirstCover(int64_t x, int64_t in, int64_t out) {
  return x * out / in;
}
constexpr int64_t AdaptiveLastCover(int64_t x, int64_t in, int64_t out) {
  return ((x + 1) * out - 1) / in;
}

// Callers validate it: every size at least 1.
struct AdaptivePool2dGeometry {
  int64_t planes = 0;
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;
};

// out[p, i, j] = the mean of in[p] over cell (i, j)'s window.
template <typename T>
void AdaptiveAvgPool2dForward(const AdaptivePool2dGeometry& g, const T* in,
                              T* out);

// grad_in (planes x in_h x in_w) = each grad_out cell spread evenly over its
// window, summed where windows overlap; overwritten, not accumulated.
template <typename T>
void AdaptiveAvgPool2dBackward(const AdaptivePool2dGeometry& g,
                               const T* grad_out, T* grad_in);

}  // namespace cohort

#endif  // COHORT_KERNELS_ADAPTIVE_POOL_H_
