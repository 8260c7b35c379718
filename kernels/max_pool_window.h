// Max pooling with any kernel, stride and padding (ResNet's 3x3 stride-2
// stem pool, 3x3 stride-1 pools), over the planes of kernels/pool.h.
//
// The windows that lie inside their row run eight outputs at a time in AVX2
// lanes; the clipped windows at the row's ends run one at a time. Both scan
// a window row by row, column by column, and keep the first maximum, so the
// output and the argmax are those of a plain scalar scan (and PyTorch's):
// ties (the zeros a ReLU leaves) go to the first element of the window.
//
// Plain functions of raw pointers, thread-safe for disjoint outputs.
#ifndef COHORT_KERNELS_MAX_POOL_WINDOW_H_
#define COHORT_KERNELS_MAX_POOL_WINDOW_H_

#include <cstdint>

#include "kernels/pool.h"

namespace cohort {

// out and argmax (the index h * in_w + w of the first maximum within its
// plane) of every window of g's planes; padding never wins.
template <typename T>
void MaxPoolWindows(const Pool2dGeometry& g, const T* in, T* out,
                    int32_t* argmax);

}  // namespace cohort

#endif  // COHORT_KERNELS_MAX_POOL_WINDOW_H_
