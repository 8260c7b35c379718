// CPU 1-D pooling kernels over "planes": a batch-inner {C, N, L} tensor is
// C*N contiguous rows of L, so the kernels loop over rows and never need to
// know which index is the channel. PyTorch's MaxPool1d and AvgPool1d
// (floor mode; the average counts zero padding, count_include_pad=True).
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Instantiated for float and
// double.
#ifndef COHORT_KERNELS_POOL1D_H_
#define COHORT_KERNELS_POOL1D_H_

#include <cstdint>

namespace cohort {

// out_l = (in_l + 2 * padding - kernel) / stride + 1. Callers validate it.
struct Pool1dGeometry {
  int64_t planes = 0;
  int64_t in_l = 0, out_l = 0;
  int64_t kernel = 1, stride = 1, padding = 0;
};

// out[p, o] = max of the window; argmax receives the position l of the
// first maximum within its row (padding never wins).
template <typename T>
void MaxPool1dForward(const Pool1dGeometry& g, const T* in, T* out,
                      int32_t* argmax);
// grad_in (planes x in_l) = the scatter-add of grad_out through argmax;
// overwritten, not accumulated.
template <typename T>
void MaxPool1dBackward(const Pool1dGeometry& g, const T* grad_out,
                       const int32_t* argmax, T* grad_in);

// The window's sum over `kernel` (padding counted in the divisor).
template <typename T>
void AvgPool1dForward(const Pool1dGeometry& g, const T* in, T* out);
template <typename T>
void AvgPool1dBackward(const Pool1dGeometry& g, const T* grad_out, T* grad_in);

}  // namespace cohort

#endif  // COHORT_KERNELS_POOL1D_H_
