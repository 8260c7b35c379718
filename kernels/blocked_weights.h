// oneDNN's blocked layout of 1x1 convolution weights, OI{B}i{B}o (format
// tag ABcd{B}b{B}a: blocks of B output and B input channels, the output
// channel innermost), back to cohort's OI.
//
// The weight gradient of every oneDNN convolution comes in this layout.
// oneDNN's own reorder out of it is slow for 1x1 kernels with many input
// channels (4.6 ms for 512 x 2048 at one thread, against 0.9 ms for 2048 x
// 512); this one transposes each pair of channel blocks in registers
// (0.6-0.7 ms for both, conv_bench "weights"). For larger kernels oneDNN's
// reorder stays, being as fast or faster.
//
// Thread safety: a plain function; runs on the compute threads
// (kernels/parallel.h).
#ifndef COHORT_KERNELS_BLOCKED_WEIGHTS_H_
#define COHORT_KERNELS_BLOCKED_WEIGHTS_H_

#include <cstdint>

namespace cohort {

// dst[o][i] = src's element (o, i) for `out` x `in` channels, both
// multiples of `block` (itself a multiple of 8).
void FromBlockedWeights(const float* src, int64_t out, int64_t in,
                        int64_t block, float* dst);

}  // namespace cohort

#endif  // COHORT_KERNELS_BLOCKED_WEIGHTS_H_
