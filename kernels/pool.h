// CPU pooling kernels over "planes": a batch-inner {C, N, H, W} tensor is
// C*N contiguous H x W planes, so every kernel here loops over planes and
// never needs to know which index is the channel.
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Instantiated for float and
// double; float has AVX2 paths for the 2x2 stride-2 max pool and, in
// kernels/max_pool_window.h, for every other max pool.
#ifndef COHORT_KERNELS_POOL_H_
#define COHORT_KERNELS_POOL_H_

#include <cstdint>

namespace cohort {

// Geometry of one 2-D pooling; out_h/out_w follow PyTorch (floor mode):
// (in + 2 * padding - kernel) / stride + 1. Callers validate it.
struct Pool2dGeometry {
  int64_t planes = 0;
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kernel = 1, stride = 1, padding = 0;
};

// out[p, oh, ow] = max of the window; argmax receives the index h * in_w + w
// of the first maximum within its plane (padding never wins).
template <typename T>
void MaxPool2dForward(const Pool2dGeometry& g, const T* in, T* out,
                      int32_t* argmax);

// grad_in (planes x in_h x in_w) = the scatter-add of grad_out through argmax;
// overwritten, not accumulated.
template <typename T>
void MaxPool2dBackward(const Pool2dGeometry& g, const T* grad_out,
                       const int32_t* argmax, T* grad_in);

// Average with zero padding counted in the divisor (kernel * kernel), like
// PyTorch's count_include_pad=true.
template <typename T>
void AvgPool2dForward(const Pool2dGeometry& g, const T* in, T* out);
template <typename T>
void AvgPool2dBackward(const Pool2dGeometry& g, const T* grad_out, T* grad_in);

// {C, N, P} -> {N, C}: out[n, c] = mean over p of in[c, n, p].
template <typename T>
void GlobalAvgPoolForward(int64_t c, int64_t n, int64_t p, const T* in, T* out);
template <typename T>
void GlobalAvgPoolBackward(int64_t c, int64_t n, int64_t p, const T* grad_out,
                           T* grad_in);

}  // namespace cohort

#endif  // COHORT_KERNELS_POOL_H_
